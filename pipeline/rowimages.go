package pipeline

import (
	"context"
	"fmt"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/checkpoint"
	"github.com/sluice-cdc/sluice/mysqlconn"
	"github.com/sluice-cdc/sluice/rowimage"
	"github.com/sluice-cdc/sluice/snapshot"
)

// The row image stores (source.row_image: fill) are part of the
// checkpointed state. The builder applies every chunk to its source's
// store before encoding it (completing its partial images); the writer
// syncs the stores before a batch goes to any sink, so that whatever a
// sink holds is in the stores, and trims their undo records after each
// checkpoint. At start each store is rewound to where its source resumes:
// the chunks that will be read again are undone, newest first, and are
// applied again on exactly the rows they were first applied on. See
// docs/ARCHITECTURE.md (Row images).

// openImages opens and rewinds the stores of the sources that fill row
// images; close closes them.
func (p *Pipeline) openImages(ctx context.Context, pl plan, cp *checkpoint.Checkpoint) (close func(), err error) {
	var reselectors []*reselector
	close = func() {
		for _, r := range reselectors {
			r.close()
		}
		for _, s := range p.srcs {
			if st := s.images.Swap(nil); st != nil {
				if err := st.Close(); err != nil {
					s.log.Warn("closing the row image store", "dir", s.cfg.RowImage.Dir, "err", err.Error())
				}
			}
		}
	}
	for i, s := range p.srcs {
		if !s.cfg.RowImage.Fill {
			continue
		}
		st, err := rowimage.Open(s.cfg.RowImage.Dir, s.log)
		if err != nil {
			close()
			return nil, err
		}
		if s.cfg.RowImage.Reselect {
			r := &reselector{ctx: ctx, src: s}
			reselectors = append(reselectors, r)
			st.SetReselect(r.read)
		}
		s.images.Store(st)
		res, err := st.Rewind(rowimage.Resume{Pos: pl.srcs[i].pos, LastSeq: cp.LastSeq, Version: cp.Version})
		if err != nil {
			close()
			return nil, fmt.Errorf("source %s: %w", s.cfg.Name, err)
		}
		switch {
		case res.Cleared:
			s.imagesCleared.Add(1)
			s.log.Warn("the row image store was emptied: rows are completed again once a snapshot reads them; counted in sluice_row_image_store_cleared_total", "dir", s.cfg.RowImage.Dir, "reason", res.Reason)
		default:
			s.log.Info("row image store ready", "dir", s.cfg.RowImage.Dir, "chunks_undone", res.Undone, "resume", pl.srcs[i].pos.String())
		}
	}
	return close, nil
}

// syncImages makes every chunk applied to the stores durable.
func (p *Pipeline) syncImages() error {
	for _, s := range p.srcs {
		if st := s.images.Load(); st != nil {
			if err := st.Sync(); err != nil {
				return fmt.Errorf("source %s: %w", s.cfg.Name, err)
			}
		}
	}
	return nil
}

// trimImages drops the undo records no restart after cp can need, and
// records cp's version in the stores.
func (p *Pipeline) trimImages(cp *checkpoint.Checkpoint) error {
	for _, s := range p.srcs {
		if st := s.images.Load(); st != nil {
			if err := st.Trim(cp.Sources[s.cfg.Name], cp.LastSeq, cp.Version); err != nil {
				return fmt.Errorf("source %s: trimming the row image store: %w", s.cfg.Name, err)
			}
		}
	}
	return nil
}

// reselector reads rows the row image store has never seen whole from the
// source (fill_missing: reselect), on a connection of its own to the
// server the source's reader reads, opened at the first read.
type reselector struct {
	ctx  context.Context
	src  *source
	conn *mysqlconn.Conn
	addr string
	// logged holds the tables whose first reselected row was logged.
	logged map[string]bool
}

func (r *reselector) read(t *binlog.Table, key binlog.Row) (binlog.Row, bool, error) {
	cfg := r.src.cfg.Binlog
	if rd := r.src.reader.Load(); rd != nil {
		cfg = rd.Source()
	}
	if r.conn != nil && r.addr != cfg.Addr {
		r.close() // the reader moved to another server
	}
	if r.conn == nil {
		c, err := binlog.Dial(r.ctx, cfg)
		if err != nil {
			return nil, false, err
		}
		r.conn, r.addr = c, cfg.Addr
	}
	q, args := snapshot.RowQuery(t, key)
	var row binlog.Row
	err := snapshot.Scan(r.ctx, r.conn, t, q, args, func(got binlog.Row) error {
		row = snapshot.CloneRow(got)
		return nil
	})
	if err != nil {
		r.close() // it may be unusable (see snapshot.Scan)
		return nil, false, err
	}
	if name := t.QualifiedName(); row != nil && !r.logged[name] {
		if r.logged == nil {
			r.logged = map[string]bool{}
		}
		r.logged[name] = true
		r.src.log.Warn("a partial row image of a row the row image store never saw whole is completed from the source's current row (fill_missing: reselect), whose values may be later than the change's; format sluice lists such columns in \"reselected\", the Kafka sink in the sluice-reselected header; logged once per table, counted in sluice_row_images_reselected_total",
			"table", name)
	}
	return row, row != nil, nil
}

func (r *reselector) close() {
	if r.conn != nil {
		r.conn.Close()
		r.conn = nil
	}
}
