package main

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/position"
)

// Tests of the Store driven by hand-made transactions (no server).

var (
	campaignsTable = &binlog.Table{Schema: "ads", Name: "campaigns", Columns: []binlog.Column{
		{Name: "id", Kind: binlog.KindUint}, {Name: "name", Kind: binlog.KindString},
		{Name: "budget", Kind: binlog.KindDecimal}, {Name: "active", Kind: binlog.KindInt},
		{Name: "created", Kind: binlog.KindDateTime}, // a column the store does not read
	}, PrimaryKey: []int{0}}
	// The columns in another order: the store goes by name.
	bannersTable = &binlog.Table{Schema: "ads", Name: "banners", Columns: []binlog.Column{
		{Name: "url", Kind: binlog.KindString}, {Name: "ID", Kind: binlog.KindUint},
		{Name: "price", Kind: binlog.KindDecimal}, {Name: "campaign_id", Kind: binlog.KindUint},
	}, PrimaryKey: []int{1}}
	otherTable = &binlog.Table{Schema: "ads", Name: "other", Columns: []binlog.Column{{Name: "id", Kind: binlog.KindInt}}}
)

func str(s string) binlog.Value { return binlog.BytesValue(binlog.KindString, []byte(s)) }
func dec(s string) binlog.Value { return binlog.BytesValue(binlog.KindDecimal, []byte(s)) }

func campaignRow(id uint64, name, budget string, active bool) binlog.Row {
	a := int64(0)
	if active {
		a = 1
	}
	return binlog.Row{binlog.UintValue(id), str(name), dec(budget), binlog.IntValue(a), binlog.NullValue()}
}

func bannerRow(id, campaign uint64, url, price string) binlog.Row {
	return binlog.Row{str(url), binlog.UintValue(id), dec(price), binlog.UintValue(campaign)}
}

func ins(t *binlog.Table, row binlog.Row) binlog.Change {
	return binlog.Change{Op: binlog.OpInsert, Table: t, After: row}
}

func upd(t *binlog.Table, before, after binlog.Row) binlog.Change {
	return binlog.Change{Op: binlog.OpUpdate, Table: t, Before: before, After: after}
}

func del(t *binlog.Table, row binlog.Row) binlog.Change {
	return binlog.Change{Op: binlog.OpDelete, Table: t, Before: row}
}

var txnOffset atomic.Uint32

// txn is one whole transaction ending at the next position.
func txn(changes ...binlog.Change) *binlog.Txn {
	end := position.Position{File: "mysql-bin.000001", Offset: 1000 + txnOffset.Add(100)}
	return &binlog.Txn{Last: true, End: end, Changes: changes}
}

func apply(t *testing.T, s *Store, txns ...*binlog.Txn) {
	t.Helper()
	for _, x := range txns {
		if err := s.Apply(x); err != nil {
			t.Fatal(err)
		}
	}
}

func ids[T any](xs []T, id func(T) uint64) []uint64 {
	out := []uint64{}
	for _, x := range xs {
		out = append(out, id(x))
	}
	return out
}

func bannerIDs(bs []Banner) []uint64 { return ids(bs, func(b Banner) uint64 { return b.ID }) }

func loaded(t *testing.T) *Store {
	s := NewStore("ads")
	s.NewLoad().Publish(position.Position{File: "mysql-bin.000001", Offset: 4})
	return s
}

func TestBannerVisibleOnlyWithItsCampaign(t *testing.T) {
	s := loaded(t)
	// Banners before their campaign: kept, not visible.
	apply(t, s, txn(ins(bannersTable, bannerRow(10, 5, "u10", "0.10")), ins(bannersTable, bannerRow(11, 5, "u11", "0.11")), ins(bannersTable, bannerRow(12, 6, "u12", "0.12"))))
	if got := s.VisibleBanners(); len(got) != 0 {
		t.Fatalf("visible without campaigns: %v", got)
	}
	if got := bannerIDs(s.AllBanners()); !slices.Equal(got, []uint64{10, 11, 12}) {
		t.Fatalf("all banners %v", got)
	}
	if got := s.Banners(5); got != nil {
		t.Fatalf("banners of a missing campaign: %v", got)
	}

	// The campaign appears: so do its banners.
	apply(t, s, txn(ins(campaignsTable, campaignRow(5, "five", "100.00", true))))
	if got := bannerIDs(s.Banners(5)); !slices.Equal(got, []uint64{10, 11}) {
		t.Fatalf("banners of 5: %v", got)
	}
	if got := bannerIDs(s.VisibleBanners()); !slices.Equal(got, []uint64{10, 11}) {
		t.Fatalf("visible: %v", got)
	}
	c, bs, ok := s.Lookup(5)
	if !ok || c != (Campaign{5, "five", "100.00", true}) || len(bs) != 2 || bs[0] != (Banner{10, 5, "u10", "0.10"}) {
		t.Fatalf("lookup 5: %+v %+v %v", c, bs, ok)
	}

	// Deleting the campaign hides them; inserting it again shows them.
	apply(t, s, txn(del(campaignsTable, campaignRow(5, "five", "100.00", true))))
	if got := s.VisibleBanners(); len(got) != 0 || s.Banners(5) != nil {
		t.Fatalf("visible after the campaign's delete: %v", got)
	}
	if st := s.Stats(); st.Banners != 3 || st.Visible != 0 || st.Campaigns != 0 {
		t.Fatalf("stats %+v", st)
	}
	apply(t, s, txn(ins(campaignsTable, campaignRow(5, "five again", "1.00", false))))
	if got := bannerIDs(s.Banners(5)); !slices.Equal(got, []uint64{10, 11}) {
		t.Fatalf("banners of 5 after it came back: %v", got)
	}

	// A banner moves to another campaign, one is deleted, one changes id.
	apply(t, s,
		txn(ins(campaignsTable, campaignRow(6, "six", "6.00", true))),
		txn(upd(bannersTable, bannerRow(10, 5, "u10", "0.10"), bannerRow(10, 6, "u10", "0.20"))),
		txn(del(bannersTable, bannerRow(11, 5, "u11", "0.11"))),
		txn(upd(bannersTable, bannerRow(12, 6, "u12", "0.12"), bannerRow(13, 6, "u13", "0.12"))),
	)
	if got := s.Banners(5); len(got) != 0 {
		t.Fatalf("banners of 5: %v", got)
	}
	if got := s.Banners(6); !slices.Equal(got, []Banner{{10, 6, "u10", "0.20"}, {13, 6, "u13", "0.12"}}) {
		t.Fatalf("banners of 6: %v", got)
	}
	if st := s.Stats(); st.Banners != 2 || st.Visible != 2 || st.Campaigns != 2 || st.Txns != 8 {
		t.Fatalf("stats %+v", st)
	}
}

func TestChunkedTransactionAppliedAtOnce(t *testing.T) {
	s := loaded(t)
	end := position.Position{File: "mysql-bin.000002", Offset: 777}
	chunks := []*binlog.Txn{
		{Chunk: 0, Changes: []binlog.Change{ins(campaignsTable, campaignRow(1, "a", "1.00", true)), ins(bannersTable, bannerRow(1, 1, "u", "1.00"))}},
		{Chunk: 1, Changes: []binlog.Change{del(campaignsTable, campaignRow(1, "a", "1.00", true))}},
		{Chunk: 2, Changes: []binlog.Change{ins(campaignsTable, campaignRow(1, "b", "2.00", true))}},
		{Chunk: 3, Last: true, End: end}, // an empty last chunk closes it
	}
	before := s.Position()
	for _, c := range chunks[:3] {
		apply(t, s, c)
		if st := s.Stats(); st.Campaigns != 0 || st.Banners != 0 || st.Position != before {
			t.Fatalf("after chunk %d the store shows part of the transaction: %+v", c.Chunk, st)
		}
		s.Advance(position.Position{File: "mysql-bin.000009", Offset: 4}) // ignored mid-transaction
	}
	apply(t, s, chunks[3])
	c, bs, ok := s.Lookup(1)
	if !ok || c.Name != "b" || len(bs) != 1 {
		t.Fatalf("after the last chunk: %+v %v %v", c, bs, ok)
	}
	if st := s.Stats(); st.Position != end || st.Chunked != 1 || st.Txns != 1 || st.Changes != 4 {
		t.Fatalf("stats %+v", st)
	}
	s.Advance(position.Position{File: "mysql-bin.000002", Offset: 900})
	if got := s.Position(); got.Offset != 900 {
		t.Fatalf("Advance between transactions: %v", got)
	}
	s.Advance(end) // never backwards
	if got := s.Position(); got.Offset != 900 {
		t.Fatalf("Advance backwards: %v", got)
	}
}

func TestPartialRowImages(t *testing.T) {
	// binlog_row_image=MINIMAL: the before image holds the key, the after
	// image the changed columns only.
	s := loaded(t)
	apply(t, s, txn(ins(campaignsTable, campaignRow(1, "a", "1.00", true)), ins(bannersTable, bannerRow(7, 1, "u", "0.50"))))
	absent := binlog.Value{}
	apply(t, s,
		txn(upd(campaignsTable,
			binlog.Row{binlog.UintValue(1), absent, absent, absent, absent},
			binlog.Row{absent, absent, dec("9.99"), absent, absent})),
		txn(upd(bannersTable,
			binlog.Row{absent, binlog.UintValue(7), absent, absent},
			binlog.Row{absent, binlog.UintValue(8), absent, absent})),
	)
	if c, _ := s.Campaign(1); c != (Campaign{1, "a", "9.99", true}) {
		t.Fatalf("campaign %+v", c)
	}
	if got := s.Banners(1); !slices.Equal(got, []Banner{{8, 1, "u", "0.50"}}) {
		t.Fatalf("banners %+v", got)
	}
	err := s.Apply(txn(ins(campaignsTable, binlog.Row{absent, str("x"), absent, absent, absent})))
	if err == nil || !strings.Contains(err.Error(), "no id") {
		t.Fatalf("insert without id: %v", err)
	}
}

func TestDDLOnTheTablesAsksForReload(t *testing.T) {
	s := loaded(t)
	for _, q := range []string{"ALTER TABLE banners ADD COLUMN x INT", "TRUNCATE TABLE `ads`.`Campaigns`", "DROP TABLE IF EXISTS ads.banners /* generated by server */", "RENAME TABLE ads.c2 TO ads.campaigns"} {
		err := s.Apply(txn(binlog.Change{Op: binlog.OpDDL, Query: q, Schema: "ads"}))
		if !errors.Is(err, ErrReload) {
			t.Errorf("%s: %v, want ErrReload", q, err)
		}
	}
	for _, q := range []string{"CREATE TABLE ads.banners_archive (id INT)", "ALTER TABLE other ADD COLUMN campaign INT"} {
		if err := s.Apply(txn(binlog.Change{Op: binlog.OpDDL, Query: q, Schema: "ads"})); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	// Other tables and other databases are ignored.
	other := *campaignsTable
	other.Schema = "shop"
	apply(t, s, txn(ins(otherTable, binlog.Row{binlog.IntValue(1)}), ins(&other, campaignRow(1, "a", "1", true))))
	if st := s.Stats(); st.Campaigns != 0 || st.Txns != 0 {
		t.Fatalf("stats %+v", st)
	}
	// A table of ours without a needed column is an error, not a guess.
	bad := &binlog.Table{Schema: "ads", Name: "campaigns", Columns: []binlog.Column{{Name: "id"}, {Name: "name"}}}
	if err := s.Apply(txn(ins(bad, binlog.Row{binlog.UintValue(1), str("a")}))); err == nil || !strings.Contains(err.Error(), `no column "budget"`) {
		t.Fatalf("missing column: %v", err)
	}
}

func TestLoadIsPublishedAtOnce(t *testing.T) {
	s := loaded(t)
	apply(t, s, txn(ins(campaignsTable, campaignRow(1, "old", "1.00", true))))
	l := s.NewLoad()
	read := func(t *binlog.Table, row binlog.Row) binlog.Change {
		return binlog.Change{Op: binlog.OpRead, Table: t, After: row}
	}
	if err := l.Add(&binlog.Txn{Snapshot: true, Changes: []binlog.Change{read(campaignsTable, campaignRow(2, "new", "2.00", false)), read(bannersTable, bannerRow(1, 2, "u", "1.00"))}}); err != nil {
		t.Fatal(err)
	}
	if got := s.Campaigns(); len(got) != 1 || got[0].Name != "old" {
		t.Fatalf("before Publish: %v", got)
	}
	p := position.Position{File: "mysql-bin.000003", Offset: 4}
	l.Publish(p)
	if got := s.Campaigns(); !slices.Equal(got, []Campaign{{2, "new", "2.00", false}}) || len(s.Banners(2)) != 1 || s.Position() != p {
		t.Fatalf("after Publish: %v at %v", got, s.Position())
	}
	if st := s.Stats(); st.Loads != 2 || !st.Loaded {
		t.Fatalf("stats %+v", st)
	}
	if err := l.Add(&binlog.Txn{Changes: []binlog.Change{ins(campaignsTable, campaignRow(3, "c", "1", true))}}); err == nil {
		t.Fatal("a load took an insert")
	}
}

// TestReadersNeverSeeHalfATransaction: transfers between two campaigns,
// each spread over several chunks, while readers check the total.
func TestReadersNeverSeeHalfATransaction(t *testing.T) {
	s := loaded(t)
	apply(t, s, txn(ins(campaignsTable, campaignRow(1, "a", "1000", true)), ins(campaignsTable, campaignRow(2, "b", "1000", true))))
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				cs := s.Campaigns()
				if len(cs) != 2 {
					t.Errorf("a reader saw %v", cs)
					return
				}
				a, _ := strconv.Atoi(cs[0].Budget)
				b, _ := strconv.Atoi(cs[1].Budget)
				if a+b != 2000 {
					t.Errorf("a reader saw %v", cs)
					return
				}
				reads.Add(1)
			}
		})
	}
	a, b := 1000, 1000
	for i := range 2000 {
		d := i%7 - 3
		rowA, rowB := campaignRow(1, "a", strconv.Itoa(a), true), campaignRow(2, "b", strconv.Itoa(b), true)
		a, b = a-d, b+d
		apply(t, s,
			&binlog.Txn{Chunk: 0, Changes: []binlog.Change{upd(campaignsTable, rowA, campaignRow(1, "a", strconv.Itoa(a), true))}},
			&binlog.Txn{Chunk: 1, Changes: []binlog.Change{ins(bannersTable, bannerRow(uint64(i), 1, "u", "1"))}},
			&binlog.Txn{Chunk: 2, Last: true, Changes: []binlog.Change{upd(campaignsTable, rowB, campaignRow(2, "b", strconv.Itoa(b), true))}},
		)
	}
	stop.Store(true)
	wg.Wait()
	if st := s.Stats(); st.Chunked != 2000 || st.Visible != 2000 || reads.Load() == 0 {
		t.Fatalf("stats %+v, %d reads", st, reads.Load())
	}
}
