//go:build unix

package throwaway

import (
	"fmt"

	"github.com/sluice-cdc/sluice/position"
)

// SeqFrom returns a FROM clause with one column, seq, running from first
// to last, for filling tables on either server: MariaDB's SEQUENCE table
// seq_FIRST_to_LAST (in the current database), or on MySQL a recursive
// CTE; and the statements to run before it in the same session (MySQL
// stops a recursion at cte_max_recursion_depth, 1000 by default).
// Server.Exec runs its statements on one connection:
//
//	from, setup := db.SeqFrom(1, 10000)
//	db.Exec(ctx, append(setup, "INSERT INTO app.t SELECT seq, seq * 2 FROM "+from)...)
func (m *Server) SeqFrom(first, last int) (from string, setup []string) {
	if m.Flavor == position.MySQL {
		return fmt.Sprintf("(WITH RECURSIVE seq_rows (seq) AS (SELECT %d UNION ALL SELECT seq + 1 FROM seq_rows WHERE seq < %d) SELECT seq FROM seq_rows) AS seq_rows", first, last),
			[]string{fmt.Sprintf("SET SESSION cte_max_recursion_depth = %d", max(last-first+2, 1000))}
	}
	return fmt.Sprintf("seq_%d_to_%d", first, last), nil
}
