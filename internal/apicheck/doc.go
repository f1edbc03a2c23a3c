// Package apicheck holds no code, only a test: TestNoThirdPartyTypesInPublicAPI
// keeps every type of a package outside the standard library and sluice
// itself out of sluice's public API (every package but internal/, cmd/ and
// examples/), so that a user of the library depends on sluice's own types
// and a dependency can be swapped without breaking them. The go-mysql
// types live behind package mysqlconn, etcd's behind coord, YAML's behind
// config.Block.
package apicheck
