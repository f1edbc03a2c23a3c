// Package pipeline is sluice's main job: it reads one source (snapshot,
// then binlog), numbers every change with a sequence number that only
// grows, delivers batches to one or more sinks, and records checkpoints
// once the sinks hold a batch durably. On start it asks each sink what it
// holds beyond the last checkpoint and resumes the source exactly after
// the last transaction the sinks hold, so that nothing is lost or doubled
// whatever instant a crash hit. See docs/DELIVERY.md.
package pipeline
