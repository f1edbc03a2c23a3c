package join

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/confdef"
)

// Type is the kind of join: which rows without a partner are emitted.
type Type string

// Join types. An outer side's rows that never joined are emitted with null
// for the other side once the watermark shows they can no longer join.
const (
	Inner     Type = "inner" // only joined pairs
	LeftJoin  Type = "left"  // and left rows that never joined
	RightJoin Type = "right" // and right rows that never joined
	FullJoin  Type = "full"  // and rows of either side that never joined
)

// outer reports whether side s's unmatched rows are emitted.
func (t Type) outer(s Side) bool {
	switch t {
	case FullJoin:
		return true
	case LeftJoin:
		return s == Left
	case RightJoin:
		return s == Right
	}
	return false
}

// Event options: which change events of a side's table join.
const (
	// Events.Updates
	UpdatesIgnore = "ignore" // updates do not join (default)
	UpdatesJoin   = "join"   // the after image joins as a new row
	// Events.Deletes
	DeletesIgnore  = "ignore"  // deletes do nothing (default)
	DeletesRetract = "retract" // the deleted row leaves the join state
	// Events.Snapshot
	SnapshotJoin   = "join"   // snapshot rows join like inserts (default)
	SnapshotIgnore = "ignore" // snapshot rows do not join
	// TimeCommit as a side's Time takes the source transaction's commit time.
	TimeCommit = "commit"
	// LateDrop as Late drops late rows (counted in Stats.LateRows).
	LateDrop = "drop"
)

// Config is one entry of the pipeline config's `joins:` list. Its fields
// are the YAML keys; docs/JOIN.md documents each one with an example. The
// tags besides yaml are the block's definition (package
// internal/confdef): each key's default and allowed values, which
// withDefaults and Validate apply and docs/JOIN.md is checked against.
type Config struct {
	// Name names the join: its sink's name ("join:" + Name), the source of
	// its records' "sluice" block, and its metrics. Letters, digits, '-'
	// and '_'.
	Name string `yaml:"name"`
	// Left and Right are the two streams.
	Left  SideConfig `yaml:"left"`
	Right SideConfig `yaml:"right"`
	// Before and After bound the join: a left row at time l joins a right
	// row of the same key at time r when l - Before <= r <= l + After.
	// Either may be negative as long as Before + After >= 0.
	Before time.Duration `yaml:"before" default:"0s"`
	After  time.Duration `yaml:"after" default:"0s"`
	// Type is inner (default), left, right or full.
	Type Type `yaml:"type" default:"inner" enum:"inner,left,right,full"`
	// Lateness is how far behind the watermark a row's event time may be
	// and still join; older rows are late. Default 0.
	Lateness time.Duration `yaml:"lateness" default:"0s"`
	// Late is "drop" (default: late rows are counted and dropped) or the
	// name of a sink that receives them as dead-letter records.
	Late string `yaml:"late" default:"drop"`
	// Sink is the name of the sink that receives the joined records. It
	// must be used by this join only.
	Sink string `yaml:"sink"`
	// Events says which change events join.
	Events Events `yaml:"events"`
	// StateDir is the directory of the join's Pebble database, on local
	// disk. It must survive restarts: it holds the rows waiting for a
	// partner and the records not yet delivered.
	StateDir string `yaml:"state_dir"`
}

// SideConfig is one stream of a join.
type SideConfig struct {
	// Table selects the side's rows: "db.table", where each part may be a
	// glob ("shop.orders", "shard_*.orders").
	Table string `yaml:"table"`
	// Key lists the join key columns; both sides list the same number, and
	// the i-th columns are compared.
	Key []string `yaml:"key"`
	// Time is the event time: the name of a DATETIME, TIMESTAMP, DATE or
	// integer (Unix epoch milliseconds) column, or "commit" for the source
	// transaction's commit time.
	Time string `yaml:"time"`
}

// Events says which change events join.
type Events struct {
	// Updates is "ignore" (default) or "join": the after image of an
	// update joins as a new row (its time taken from the after image, or
	// the update's commit time).
	Updates string `yaml:"updates" default:"ignore" enum:"ignore,join" want:"ignore (updates do not join) or join (the after image joins as a new row)"`
	// Deletes is "ignore" (default) or "retract": a deleted row leaves the
	// state, so it joins no later row and, if it has not joined, never
	// comes out null-extended.
	Deletes string `yaml:"deletes" default:"ignore" enum:"ignore,retract" want:"ignore, or retract (a deleted row leaves the join state)"`
	// Snapshot is "join" (default) or "ignore": whether rows read by a
	// snapshot join like inserts. With time: commit they have no event
	// time and are skipped either way.
	Snapshot string `yaml:"snapshot" default:"join" enum:"join,ignore" want:"join (snapshot rows join like inserts) or ignore"`
}

// withDefaults fills the defaults of unset fields (the default tags).
func (c Config) withDefaults() Config {
	confdef.ApplyDefaults(&c)
	return c
}

// Validate says what is wrong with c and how to fix it. Errors name the
// YAML keys ("joins[orders].left.key: ...").
func (c *Config) Validate() error {
	d := c.withDefaults()
	where := "joins"
	if c.Name != "" {
		where = fmt.Sprintf("joins[%s]", c.Name)
	}
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%s.%s: %s", where, key, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Name == "":
		return bad("name", "is required (letters, digits, '-', '_'), e.g. name: orders_payments")
	case !validName(c.Name):
		return bad("name", "%q may hold only letters, digits, '-' and '_'", c.Name)
	}
	for _, s := range []struct {
		key string
		sc  *SideConfig
	}{{"left", &c.Left}, {"right", &c.Right}} {
		if err := s.sc.validate(); err != nil {
			return bad(s.key+"."+err.key, "%s", err.msg)
		}
	}
	if len(c.Left.Key) != len(c.Right.Key) {
		return bad("right.key", "has %d columns but left.key has %d: list the same number of columns on both sides, in the order they are compared", len(c.Right.Key), len(c.Left.Key))
	}
	switch {
	case c.Before+c.After < 0:
		return bad("before", "before %s and after %s leave no time at all (right.time between left.time - before and left.time + after): make before + after >= 0", c.Before, c.After)
	case c.Lateness < 0:
		return bad("lateness", "%s is negative: use 0 (rows behind the watermark are late) or a positive duration", c.Lateness)
	}
	if v := confdef.Check(&d, "type"); v != nil {
		return bad("type", "%q is not a join type: use %s", c.Type, v.Want)
	}
	if c.Sink == "" {
		return bad("sink", "is required: the name of the sink (under sinks:) that receives the joined records")
	}
	if d.Late != LateDrop && d.Late == c.Sink {
		return bad("late", "names the join's own sink %q: dead-letter records need a sink of their own (or late: drop)", c.Late)
	}
	if v := confdef.Check(&d, "events"); v != nil {
		return bad(v.Key, "%q: use %s", v.Value, v.Want)
	}
	if c.StateDir == "" {
		return bad("state_dir", "is required: a directory on local disk for the join's state, e.g. state_dir: /var/lib/sluice/joins/%s", c.Name)
	}
	return nil
}

type fieldError struct{ key, msg string }

func (e *fieldError) Error() string { return e.key + ": " + e.msg }

func (s *SideConfig) validate() *fieldError {
	if s.Table == "" {
		return &fieldError{"table", `is required: "db.table" (globs allowed, e.g. shop.orders or shard_*.orders)`}
	}
	f, err := binlog.ParseFilter(s.Table)
	if err != nil {
		return &fieldError{"table", err.Error()}
	}
	if f.Len() != 1 {
		return &fieldError{"table", fmt.Sprintf("%q names several patterns: a side is one table pattern (use a glob to cover several tables; a name with a ',' goes in backticks)", s.Table)}
	}
	if len(s.Key) == 0 {
		return &fieldError{"key", "is required: the join key column(s), e.g. key: [order_id]"}
	}
	for i, k := range s.Key {
		if strings.TrimSpace(k) == "" {
			return &fieldError{"key", fmt.Sprintf("column %d is empty", i+1)}
		}
	}
	if s.Time == "" {
		return &fieldError{"time", `is required: a DATETIME, TIMESTAMP, DATE or integer (epoch milliseconds) column, or "commit" for the transaction's commit time`}
	}
	return nil
}

// timeColumn returns the configured time column, or "" for the commit
// time. A column named commit is written `commit` (back-quoted).
func (s *SideConfig) timeColumn() string {
	if s.Time == TimeCommit {
		return ""
	}
	return strings.TrimSuffix(strings.TrimPrefix(s.Time, "`"), "`")
}

func validName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return s != ""
}

// fingerprint is what the stored state depends on: a state written under
// another fingerprint is refused rather than joined wrongly.
func (c *Config) fingerprint() string {
	d := c.withDefaults()
	side := func(s SideConfig) string {
		return s.Table + "|" + strings.Join(s.Key, ",") + "|" + s.Time
	}
	return "left=" + side(d.Left) + ";right=" + side(d.Right)
}
