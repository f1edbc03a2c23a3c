//go:build linux

package throwaway

import "syscall"

// sysProcAttr puts the child in its own process group (so signals to the
// test binary's group, e.g. ^C, are handled by us, and we can kill the whole
// group) and asks the kernel to SIGKILL it if the thread that started it
// dies, which on a crashed or killed test binary means immediately.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
