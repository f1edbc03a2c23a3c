//go:build unix && !linux

package throwaway

import "syscall"

// sysProcAttr puts the child in its own process group. Pdeathsig is Linux
// only; elsewhere a crashed test binary may leave a server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
