package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/position"
)

// Campaign is one row of campaigns.
type Campaign struct {
	ID     uint64
	Name   string
	Budget string // exact decimal text, as the server has it ("1250.00")
	Active bool
}

// Banner is one row of banners.
type Banner struct {
	ID         uint64
	CampaignID uint64
	URL        string
	Price      string // exact decimal text
}

// ErrReload is returned by Store.Apply for a DDL statement that may have
// changed the tables (ALTER, TRUNCATE, DROP, RENAME, CREATE ... of
// campaigns or banners). Such a statement can change rows without any row
// event in the binlog (ALTER ... MODIFY budget DECIMAL(12,1) rounds every
// budget), so the only correct way on is to read the tables again.
var ErrReload = errors.New("a DDL statement changed the tables: they must be read again")

// Store is the in-memory copy of campaigns and banners.
//
// Every banner is kept, but only the banners whose campaign exists are
// visible (Banners, VisibleBanners, Lookup): deleting a campaign hides its
// banners, inserting it again shows them again, and a banner inserted
// before its campaign appears when the campaign does. AllBanners returns
// the hidden ones too.
//
// Changes are applied a whole transaction at a time under the write lock,
// so readers never see part of a transaction. Any number of goroutines may
// read; one goroutine loads and applies (NewLoad, Apply, Advance).
type Store struct {
	db string

	mu         sync.RWMutex
	campaigns  map[uint64]Campaign
	banners    map[uint64]Banner              // all banners, visible or not
	byCampaign map[uint64]map[uint64]struct{} // campaign id -> ids of its banners
	pos        position.Position              // the binlog position the contents match
	loaded     bool
	loads      int
	loadedAt   time.Time
	txns       int64 // transactions applied since the first load
	changes    int64
	chunked    int64 // of which delivered in several chunks
	lastCommit time.Time

	// Owned by the applying goroutine.
	pending []op                     // the changes of the transaction being received
	layouts map[*binlog.Table]layout // column positions per table definition
}

// NewStore returns an empty store for the tables campaigns and banners of
// database db. It is not Loaded until a first load is published.
func NewStore(db string) *Store {
	s := &Store{db: db, layouts: map[*binlog.Table]layout{}}
	s.campaigns, s.banners, s.byCampaign = map[uint64]Campaign{}, map[uint64]Banner{}, map[uint64]map[uint64]struct{}{}
	return s
}

// --- reading -------------------------------------------------------------

// Campaign returns the campaign with id.
func (s *Store) Campaign(id uint64) (Campaign, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.campaigns[id]
	return c, ok
}

// Campaigns returns every campaign, by id.
func (s *Store) Campaigns() []Campaign {
	s.mu.RLock()
	out := make([]Campaign, 0, len(s.campaigns))
	for _, c := range s.campaigns {
		out = append(out, c)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b Campaign) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Banners returns the banners of a campaign, by id: none when the campaign
// does not exist.
func (s *Store) Banners(campaignID uint64) []Banner {
	_, banners, _ := s.Lookup(campaignID)
	return banners
}

// Lookup returns a campaign and its banners, both as of the same transaction.
func (s *Store) Lookup(campaignID uint64) (Campaign, []Banner, bool) {
	s.mu.RLock()
	c, ok := s.campaigns[campaignID]
	var out []Banner
	if ok {
		for id := range s.byCampaign[campaignID] {
			out = append(out, s.banners[id])
		}
	}
	s.mu.RUnlock()
	sortBanners(out)
	return c, out, ok
}

// VisibleBanners returns the banners whose campaign exists, by id: what
// SELECT b.* FROM banners b JOIN campaigns c ON c.id = b.campaign_id returns.
func (s *Store) VisibleBanners() []Banner {
	s.mu.RLock()
	var out []Banner
	for cid := range s.campaigns {
		for id := range s.byCampaign[cid] {
			out = append(out, s.banners[id])
		}
	}
	s.mu.RUnlock()
	sortBanners(out)
	return out
}

// AllBanners returns every banner, hidden ones included, by id.
func (s *Store) AllBanners() []Banner {
	s.mu.RLock()
	out := make([]Banner, 0, len(s.banners))
	for _, b := range s.banners {
		out = append(out, b)
	}
	s.mu.RUnlock()
	sortBanners(out)
	return out
}

func sortBanners(bs []Banner) {
	slices.SortFunc(bs, func(a, b Banner) int { return cmp.Compare(a.ID, b.ID) })
}

// Position returns the binlog position the store's contents match: every
// transaction before it is applied, none after it.
func (s *Store) Position() position.Position {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pos
}

// Stats is a summary of the store.
type Stats struct {
	Loaded    bool
	Loads     int // initial load plus reloads after DDL
	LoadedAt  time.Time
	Campaigns int
	Banners   int // all banners
	Visible   int // banners whose campaign exists
	Txns      int64
	Changes   int64
	Chunked   int64 // transactions that arrived in several chunks
	// LastCommit is the commit time of the last transaction applied.
	LastCommit time.Time
	Position   position.Position
}

// Stats returns a summary, consistent as of one transaction.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{
		Loaded: s.loaded, Loads: s.loads, LoadedAt: s.loadedAt,
		Campaigns: len(s.campaigns), Banners: len(s.banners),
		Txns: s.txns, Changes: s.changes, Chunked: s.chunked,
		LastCommit: s.lastCommit, Position: s.pos,
	}
	for cid := range s.campaigns {
		st.Visible += len(s.byCampaign[cid])
	}
	return st
}

func (st Stats) String() string {
	if !st.Loaded {
		return "loading the tables..."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "campaigns=%d banners=%d (visible %d, held back %d) txns=%d changes=%d chunked=%d",
		st.Campaigns, st.Banners, st.Visible, st.Banners-st.Visible, st.Txns, st.Changes, st.Chunked)
	if st.Loads > 1 {
		fmt.Fprintf(&b, " reloads=%d", st.Loads-1)
	}
	fmt.Fprintf(&b, " at %s", st.Position.String())
	if !st.LastCommit.IsZero() {
		fmt.Fprintf(&b, " last-commit=%s", st.LastCommit.Format(time.TimeOnly))
	}
	return b.String()
}

// --- loading ---------------------------------------------------------------

// Load is a load of both tables being built aside: readers keep seeing
// the previous contents until Publish swaps the new ones in at once.
type Load struct {
	s    *Store
	data tables
	rows int64
}

// NewLoad starts a load.
func (s *Store) NewLoad() *Load {
	return &Load{s: s, data: newTables()}
}

// Add takes a chunk of rows read by the snapshot (Op binlog.OpRead); rows
// of other tables are ignored. The chunk may be released when Add returns.
func (l *Load) Add(txn *binlog.Txn) error {
	for i := range txn.Changes {
		ch := &txn.Changes[i]
		if ch.Op != binlog.OpRead {
			return fmt.Errorf("inmemory: a snapshot chunk holds a %v change", ch.Op)
		}
		o, ok, err := l.s.decode(ch)
		if err != nil {
			return err
		}
		if ok {
			l.data.apply(&o)
			l.rows++
		}
	}
	return nil
}

// Publish makes the loaded rows the store's contents, matching the binlog
// position pos (where the stream must continue from).
func (l *Load) Publish(pos position.Position) {
	s := l.s
	s.mu.Lock()
	s.campaigns, s.banners, s.byCampaign = l.data.campaigns, l.data.banners, l.data.byCampaign
	s.pos = pos
	s.loaded = true
	s.loads++
	s.loadedAt = time.Now()
	s.mu.Unlock()
	s.pending = s.pending[:0]
	clear(s.layouts) // table definitions of the previous load and stream
	l.data = tables{}
}

// --- streaming ---------------------------------------------------------------

// Apply takes the next transaction, or chunk of one, from a binlog reader
// started at the position of the last load. The chunks of a transaction
// are held until its Last chunk, and then the whole transaction is applied
// at once. The chunk may be released when Apply returns: nothing of its
// memory is kept. Apply returns ErrReload for DDL that touched the tables.
func (s *Store) Apply(txn *binlog.Txn) error {
	if txn.Chunk == 0 {
		s.pending = s.pending[:0]
	}
	for i := range txn.Changes {
		ch := &txn.Changes[i]
		if ch.Op == binlog.OpDDL {
			if s.ddlTouchesTables(ch) {
				s.pending = s.pending[:0]
				return fmt.Errorf("%w: %q at %s:%d", ErrReload, abbrev(ch.Query, 120), ch.File, ch.Pos)
			}
			continue
		}
		o, ok, err := s.decode(ch)
		if err != nil {
			s.pending = s.pending[:0]
			return err
		}
		if ok {
			s.pending = append(s.pending, o)
		}
	}
	if !txn.Last {
		return nil
	}
	s.mu.Lock()
	data := tables{s.campaigns, s.banners, s.byCampaign}
	for i := range s.pending {
		data.apply(&s.pending[i])
	}
	if !txn.End.IsZero() && txn.End.Compare(s.pos) >= 0 {
		s.pos = txn.End
	}
	if len(s.pending) > 0 {
		s.txns++
		s.changes += int64(len(s.pending))
		if txn.Chunk > 0 {
			s.chunked++
		}
		s.lastCommit = txn.CommitTime
	}
	s.mu.Unlock()
	clear(s.pending) // drop the strings
	s.pending = s.pending[:0]
	return nil
}

// Advance records that the binlog up to pos holds nothing more for the
// store (the reader has handed over every transaction before it). Call it
// only between transactions.
func (s *Store) Advance(pos position.Position) {
	if pos.File == "" || len(s.pending) > 0 {
		return
	}
	s.mu.Lock()
	if pos.Compare(s.pos) > 0 {
		s.pos = pos
	}
	s.mu.Unlock()
}

// ddlTouchesTables reports whether a DDL statement may concern campaigns
// or banners. It errs on the side of yes: a needless reload costs time, a
// missed one leaves the copy wrong.
func (s *Store) ddlTouchesTables(ch *binlog.Change) bool {
	for _, w := range strings.FieldsFunc(ch.Query, func(r rune) bool {
		return !(r == '_' || r == '$' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= 0x80)
	}) {
		if strings.EqualFold(w, "campaigns") || strings.EqualFold(w, "banners") {
			return true
		}
	}
	return false
}

func abbrev(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// --- decoding ----------------------------------------------------------------

// The two tables and the columns read from each, in this order.
const (
	tableCampaigns = 1
	tableBanners   = 2
)

var columnNames = [...][4]string{
	tableCampaigns: {"id", "name", "budget", "active"},
	tableBanners:   {"id", "campaign_id", "url", "price"},
}

// layout is where the columns of a table definition are.
type layout struct {
	table int // 0: not one of ours
	cols  [4]int
}

func (s *Store) layoutOf(t *binlog.Table) (layout, error) {
	if l, ok := s.layouts[t]; ok {
		return l, nil
	}
	var l layout
	if t.Schema == s.db {
		switch t.Name {
		case "campaigns":
			l.table = tableCampaigns
		case "banners":
			l.table = tableBanners
		}
	}
	if l.table != 0 {
		for i, name := range columnNames[l.table] {
			if l.cols[i] = t.ColumnIndex(name); l.cols[i] < 0 {
				return l, fmt.Errorf("inmemory: table %s has no column %q", t.QualifiedName(), name)
			}
		}
	}
	s.layouts[t] = l
	return l, nil
}

// op is one decoded change. A row image may lack columns (binlog_row_image
// MINIMAL or NOBLOB): has says which of the four were present, and an
// update changes only those, on top of the row as it was.
type op struct {
	table int
	kind  binlog.Op // OpInsert (also for OpRead), OpUpdate, OpDelete
	key   uint64    // the id before the change (update, delete)
	has   uint8
	c     Campaign
	b     Banner
}

func (s *Store) decode(ch *binlog.Change) (op, bool, error) {
	if ch.Table == nil {
		return op{}, false, nil
	}
	l, err := s.layoutOf(ch.Table)
	if err != nil || l.table == 0 {
		return op{}, false, err
	}
	o := op{table: l.table, kind: ch.Op}
	switch ch.Op {
	case binlog.OpInsert, binlog.OpRead:
		o.kind = binlog.OpInsert
		if err = o.fill(l, ch.After); err == nil && o.has&1 == 0 {
			err = errors.New("no id in the row")
		}
	case binlog.OpUpdate, binlog.OpDelete:
		id := ch.Before[l.cols[0]]
		if id.IsAbsent() {
			err = errors.New("no id in the row's before image")
		} else if o.key, err = uintOf(id); err == nil && ch.Op == binlog.OpUpdate {
			err = o.fill(l, ch.After)
		}
	default:
		return op{}, false, nil
	}
	if err != nil {
		return op{}, false, fmt.Errorf("inmemory: %v of %s at %s:%d row %d: %w", ch.Op, ch.Table.QualifiedName(), ch.File, ch.Pos, ch.Row, err)
	}
	return o, true, nil
}

// fill copies the present columns of row into o (strings are copied out
// of the chunk's memory).
func (o *op) fill(l layout, row binlog.Row) error {
	for i, c := range l.cols {
		v := row[c]
		if v.IsAbsent() {
			continue
		}
		o.has |= 1 << i
		var err error
		switch {
		case o.table == tableCampaigns && i == 0:
			o.c.ID, err = uintOf(v)
		case o.table == tableCampaigns && i == 1:
			o.c.Name = text(v)
		case o.table == tableCampaigns && i == 2:
			o.c.Budget = text(v)
		case o.table == tableCampaigns && i == 3:
			o.c.Active = v.Uint() != 0 && !v.IsNull()
		case i == 0:
			o.b.ID, err = uintOf(v)
		case i == 1:
			o.b.CampaignID, err = uintOf(v)
		case i == 2:
			o.b.URL = text(v)
		case i == 3:
			o.b.Price = text(v)
		}
		if err != nil {
			return fmt.Errorf("column %s: %w", columnNames[o.table][i], err)
		}
	}
	return nil
}

func uintOf(v binlog.Value) (uint64, error) {
	switch v.Kind() {
	case binlog.KindUint:
		return v.Uint(), nil
	case binlog.KindInt:
		if v.Int() >= 0 {
			return uint64(v.Int()), nil
		}
	}
	return 0, fmt.Errorf("%s value %s is not an id", v.Kind(), v)
}

// text renders a value as text: strings and decimals as they are (copied),
// NULL as "", other kinds as Value.String renders them.
func text(v binlog.Value) string {
	switch v.Kind() {
	case binlog.KindNull:
		return ""
	case binlog.KindString, binlog.KindBytes, binlog.KindDecimal, binlog.KindJSON:
		return string(v.Bytes())
	}
	return v.String()
}

// --- the maps ----------------------------------------------------------------

type tables struct {
	campaigns  map[uint64]Campaign
	banners    map[uint64]Banner
	byCampaign map[uint64]map[uint64]struct{}
}

func newTables() tables {
	return tables{map[uint64]Campaign{}, map[uint64]Banner{}, map[uint64]map[uint64]struct{}{}}
}

func (t tables) apply(o *op) {
	switch o.table {
	case tableCampaigns:
		switch o.kind {
		case binlog.OpInsert:
			t.campaigns[o.c.ID] = o.c
		case binlog.OpDelete:
			delete(t.campaigns, o.key)
		case binlog.OpUpdate:
			c := t.campaigns[o.key]
			delete(t.campaigns, o.key)
			c.ID = o.key
			o.merge(&c, nil)
			t.campaigns[c.ID] = c
		}
	case tableBanners:
		switch o.kind {
		case binlog.OpInsert:
			t.putBanner(o.b)
		case binlog.OpDelete:
			t.deleteBanner(o.key)
		case binlog.OpUpdate:
			b := t.banners[o.key]
			t.deleteBanner(o.key)
			b.ID = o.key
			o.merge(nil, &b)
			t.putBanner(b)
		}
	}
}

// merge sets the columns an update's after image holds.
func (o *op) merge(c *Campaign, b *Banner) {
	for i := range 4 {
		if o.has&(1<<i) == 0 {
			continue
		}
		switch {
		case c != nil && i == 0:
			c.ID = o.c.ID
		case c != nil && i == 1:
			c.Name = o.c.Name
		case c != nil && i == 2:
			c.Budget = o.c.Budget
		case c != nil && i == 3:
			c.Active = o.c.Active
		case i == 0:
			b.ID = o.b.ID
		case i == 1:
			b.CampaignID = o.b.CampaignID
		case i == 2:
			b.URL = o.b.URL
		case i == 3:
			b.Price = o.b.Price
		}
	}
}

func (t tables) putBanner(b Banner) {
	t.deleteBanner(b.ID)
	t.banners[b.ID] = b
	set := t.byCampaign[b.CampaignID]
	if set == nil {
		set = map[uint64]struct{}{}
		t.byCampaign[b.CampaignID] = set
	}
	set[b.ID] = struct{}{}
}

func (t tables) deleteBanner(id uint64) {
	old, ok := t.banners[id]
	if !ok {
		return
	}
	delete(t.banners, id)
	if set := t.byCampaign[old.CampaignID]; set != nil {
		delete(set, id)
		if len(set) == 0 {
			delete(t.byCampaign, old.CampaignID)
		}
	}
}
