// Package coord lets several replicas of a pipeline run at once with one
// of them working: they elect a leader through etcd, the others wait to
// take over, and a leader that dies or is cut off is replaced after about
// the lease TTL.
//
// A replica connects, campaigns, and works while it leads:
//
//	c, err := coord.New(cfg, "orders", log)       // cfg: endpoints, lease_ttl, ...
//	defer c.Close()
//	l, err := c.Campaign(ctx)                      // blocks while another replica leads
//	store := c.CheckpointStore(l)                  // EtcdStore fenced by l's guard
//	go run(ctx, store, l.Epoch())                  // stamp writes with the epoch
//	<-l.Lost()                                     // stop writing now, then
//	l.Resign(ctx)                                  // and campaign again
//
// Three things keep two leaders from doing harm:
//
//   - The epoch. Each leadership has an epoch, the leader key's etcd
//     CreateRevision, which only grows from one leadership to the next.
//     Sinks can refuse what an older epoch writes.
//   - The guard. A leadership's guard, an etcd comparison, holds only
//     while the leader key is the one of this leadership; the EtcdStore
//     and EtcdSchemaStore made with the leadership (Etcd.CheckpointStore,
//     Etcd.SchemaStore) put it in the transaction of every write, so a
//     deposed leader cannot move the checkpoint, however late its save
//     arrives.
//   - Lost. A leader that etcd has not answered for 2/3 of the lease TTL
//     closes Lost, at least TTL/3 before etcd can let another replica
//     lead (the timing argument is on Leadership).
//
// Status shows who leads and who waits, for `sluice status`.
//
// Keys, under Config.Prefix (default "/sluice/"):
//
//	/sluice/<pipeline>/leader/<lease hex>  {"id":"host:pid","since":"..."}  one per campaigning replica
//	/sluice/<pipeline>/checkpoint          the checkpoint (EtcdStore)
package coord
