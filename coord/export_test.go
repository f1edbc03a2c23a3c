package coord

import clientv3 "go.etcd.io/etcd/client/v3"

// For the tests of package coord_test, which drive etcd directly: the
// client and stores on any client, key and guard. None of this is in the
// package's API, which names no etcd type.

// Client is the etcd client of e.
func (e *Etcd) Client() *clientv3.Client { return e.client }

// NewEtcdStore is an EtcdStore of the checkpoint at key, fenced by guard
// (nil: unfenced).
var NewEtcdStore = newEtcdStore

// NewEtcdSchemaStore is an EtcdSchemaStore under prefix, fenced by guard
// (nil: unfenced).
var NewEtcdSchemaStore = newEtcdSchemaStore
