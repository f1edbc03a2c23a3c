package codec

// Format debezium's schema-change events: what Debezium's MySQL connector
// writes to its schema-change topic (named after topic.prefix) for a DDL
// statement, with JsonConverter. Fields, order and schemas follow
// Debezium's SchemaFactory (schemaHistoryConnectorKeySchema,
// schemaHistoryConnectorValueSchema, schemaHistoryChangeSchema,
// schemaHistoryTableSchema, schemaHistoryColumnSchema) and
// ConnectTableChangeSerializer.

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/jsonstr"
)

// dbzSchemaChangeKeySchema is the schema of the schema-change topic's
// keys: io.debezium.connector.<connector>.SchemaChangeKey, as Debezium's
// SchemaFactory names it after the connector ("mysql", "mariadb").
func dbzSchemaChangeKeySchema(connector string) string {
	return `{"type":"struct","fields":[{"type":"string","optional":false,"field":"databaseName"}],"optional":false,"name":"io.debezium.connector.` + connector + `.SchemaChangeKey","version":1}`
}

const dbzColumnSchema = `{"type":"struct","fields":[` +
	`{"type":"string","optional":false,"field":"name"},` +
	`{"type":"int32","optional":false,"field":"jdbcType"},` +
	`{"type":"int32","optional":true,"field":"nativeType"},` +
	`{"type":"string","optional":false,"field":"typeName"},` +
	`{"type":"string","optional":true,"field":"typeExpression"},` +
	`{"type":"string","optional":true,"field":"charsetName"},` +
	`{"type":"int32","optional":true,"field":"length"},` +
	`{"type":"int32","optional":true,"field":"scale"},` +
	`{"type":"int32","optional":false,"field":"position"},` +
	`{"type":"boolean","optional":true,"field":"optional"},` +
	`{"type":"boolean","optional":true,"field":"autoIncremented"},` +
	`{"type":"boolean","optional":true,"field":"generated"},` +
	`{"type":"string","optional":true,"field":"comment"},` +
	`{"type":"string","optional":true,"field":"defaultValueExpression"},` +
	`{"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"enumValues"}` +
	`],"optional":false,"name":"io.debezium.connector.schema.Column","version":1}`

const dbzTableSchema = `{"type":"struct","fields":[` +
	`{"type":"string","optional":true,"field":"defaultCharsetName"},` +
	`{"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"primaryKeyColumnNames"},` +
	`{"type":"array","items":` + dbzColumnSchema + `,"optional":false,"field":"columns"},` +
	`{"type":"string","optional":true,"field":"comment"}` +
	`],"optional":true,"name":"io.debezium.connector.schema.Table","version":1,"field":"table"}`

// dbzSchemaChangeValueSchema is the schema of the schema-change topic's
// values: io.debezium.connector.<connector>.SchemaChangeValue.
func dbzSchemaChangeValueSchema(connector string) string {
	return `{"type":"struct","fields":[` + dbzSourceSchema(connector) + dbzSchemaChangeValueRest +
		`],"optional":false,"name":"io.debezium.connector.` + connector + `.SchemaChangeValue","version":1}`
}

const dbzSchemaChangeValueRest = `,` +
	`{"type":"int64","optional":false,"field":"ts_ms"},` +
	`{"type":"string","optional":true,"field":"databaseName"},` +
	`{"type":"string","optional":true,"field":"schemaName"},` +
	`{"type":"string","optional":true,"field":"ddl"},` +
	`{"type":"array","items":{"type":"struct","fields":[` +
	`{"type":"string","optional":false,"field":"type"},` +
	`{"type":"string","optional":false,"field":"id"},` +
	dbzTableSchema +
	`],"optional":false,"name":"io.debezium.connector.schema.Change","version":1},"optional":false,"field":"tableChanges"}`

// schemaChangeDB is the database a DDL change applies to: its first
// table change's, else the one it names or ran in.
func schemaChangeDB(ch *binlog.Change) string {
	if len(ch.TableChanges) > 0 && ch.TableChanges[0].DB != "" {
		return ch.TableChanges[0].DB
	}
	return changeDB(ch)
}

// appendDbzSchemaChangeKey appends the key of a schema-change event:
// {"databaseName":D}.
func (e *Encoder) appendDbzSchemaChangeKey(dst []byte, ch *binlog.Change) []byte {
	if e.dbz.opts.schemas {
		dst = append(dst, `{"schema":`...)
		dst = append(dst, e.dbz.conn.changeKeySchema...)
		dst = append(dst, `,"payload":`...)
	}
	dst = append(dst, `{"databaseName":`...)
	dst = jsonstr.AppendJava(dst, schemaChangeDB(ch))
	dst = append(dst, '}')
	if e.dbz.opts.schemas {
		dst = append(dst, '}')
	}
	return dst
}

// appendDbzSchemaChange appends the schema-change event of a DDL change,
// as one line ending in '\n':
//
//	{"source":{...},"ts_ms":T,"databaseName":D,"schemaName":null,
//	 "ddl":Q,"tableChanges":[{"type":"CREATE|ALTER|DROP","id":"\"D\".\"T\"",
//	 "table":{"defaultCharsetName":..,"primaryKeyColumnNames":[..],
//	 "columns":[{"name":..,"jdbcType":..,...}],"comment":..}|null},...]}
//
// The source block is the statement's (snapshot "false", table the
// tables it changed joined by ','), ts_ms the time of writing. The table
// of a DROP is null, as Debezium writes it. tableChanges come from the
// schema history (binlog.Change.TableChanges): without one (a source with
// no schema history) the array is empty. Where Debezium writes one event
// per table of a statement that changes several (DROP TABLE a, b), this
// writes one event with a table change per table (the statement as the
// server logged it), and AppendDebeziumSplit Debezium's events. The
// statement is as the server logged it on MariaDB, as Debezium's MySQL
// connector rewrites it on MySQL (dbzNormalize), and a DROP TABLE of one
// table as Debezium writes it (dbzDropTexts).
func (e *Encoder) appendDbzSchemaChange(dst []byte, txn *binlog.Txn, ch *binlog.Change) []byte {
	tcs := dbzTableChanges(ch)
	ddl := ch.Query
	if texts := dbzDropTexts(ch.Query, tcs); len(texts) == 1 {
		ddl = texts[0]
	} else if !e.dbz.conn.mariaDB {
		ddl = dbzNormalize(ddl, ch.ANSIQuotes)
	}
	return e.appendDbzSchemaEvent(dst, txn, ch, tcs, ddl)
}

// AppendDebeziumSplit returns the events Debezium writes in place of the
// one event of ch, each without a newline: for a DROP TABLE of several
// tables, one schema-change event per table, each with its own statement
// ("DROP TABLE `db`.`t`", see dbzDropTexts) and table change. It returns
// nil for every other change, and in format sluice. A sink with records
// (Kafka) writes them in place of the message's value (sink.Message.Split).
func (e *Encoder) AppendDebeziumSplit(txn *binlog.Txn, ch *binlog.Change) [][]byte {
	if e.dbz == nil || ch.Op != binlog.OpDDL {
		return nil
	}
	tcs := dbzTableChanges(ch)
	texts := dbzDropTexts(ch.Query, tcs)
	if len(texts) < 2 {
		return nil
	}
	e.dbz.useFlavor(txn)
	out := make([][]byte, len(texts))
	for i := range texts {
		out[i] = bytes.TrimSuffix(e.appendDbzSchemaEvent(nil, txn, ch, tcs[i:i+1], texts[i]), []byte{'\n'})
	}
	return out
}

// dbzDropTexts returns, for a DROP TABLE statement q that drops the tables
// of tcs, the statement Debezium writes for each table: q's text from DROP
// to the first table name ("DROP TABLE ", "DROP TABLE IF EXISTS "), the
// table as `db`.`t`, and q's RESTRICT or CASCADE; the server's "/*
// generated by server */" and the other tables left out. It returns nil
// for any other statement.
func dbzDropTexts(q string, tcs []binlog.TableChange) []string {
	if len(tcs) == 0 || !startsWith(q, "DROP") {
		return nil
	}
	for i := range tcs {
		if tcs[i].Kind != "DROP" {
			return nil
		}
	}
	start := len(q) - len(skipSpaceAndComments(q))
	i, table := start+len("DROP"), false
	for want := []string{"TEMPORARY", "TABLE", "TABLES", "IF", "EXISTS"}; ; {
		rest := skipSpaceAndComments(q[i:])
		j := 0
		for j < len(rest) && (rest[j] >= 'A' && rest[j] <= 'Z' || rest[j] >= 'a' && rest[j] <= 'z') {
			j++
		}
		k := slices.IndexFunc(want, func(kw string) bool { return strings.EqualFold(kw, rest[:j]) })
		if j == 0 || k < 0 {
			i = len(q) - len(rest)
			break
		}
		table = table || want[k] == "TABLE" || want[k] == "TABLES"
		want = want[k+1:]
		i = len(q) - len(rest) + j
	}
	if !table {
		return nil // DROP DATABASE, DROP VIEW, ...
	}
	prefix := q[start:i]
	suffix := ""
	tail := stripTrailingComments(q)
	for _, kw := range []string{"RESTRICT", "CASCADE"} {
		if n := len(tail) - len(kw); n > 0 && strings.EqualFold(tail[n:], kw) && strings.ContainsRune(" \t\r\n`", rune(tail[n-1])) {
			suffix = " " + tail[n:]
		}
	}
	texts := make([]string, len(tcs))
	for i := range tcs {
		texts[i] = prefix + "`" + tcs[i].DB + "`.`" + tcs[i].Table + "`" + suffix
	}
	return texts
}

// skipSpaceAndComments returns q without its leading white space and
// comments.
func skipSpaceAndComments(q string) string {
	for {
		q = strings.TrimLeft(q, " \t\r\n")
		if !strings.HasPrefix(q, "/*") {
			return q
		}
		end := strings.Index(q[2:], "*/")
		if end < 0 {
			return q
		}
		q = q[2+end+2:]
	}
}

// stripTrailingComments returns q without its trailing white space and
// /* */ comments.
func stripTrailingComments(q string) string {
	for {
		q = strings.TrimRight(q, " \t\r\n;")
		if !strings.HasSuffix(q, "*/") {
			return q
		}
		start := strings.LastIndex(q[:len(q)-2], "/*")
		if start < 0 {
			return q
		}
		q = q[:start]
	}
}

// dbzTableOrder returns the names of the tables of tcs in the order a
// Debezium source block lists them: its source info keeps the statement's
// tables in a java.util.HashSet<TableId> (BinlogSourceInfo.tableEvent,
// new HashSet<>(tables)), so they come in the order of their buckets, by
// the Java hash of the id "db.table" spread as HashMap spreads it, in a
// table of the capacity that constructor gives (16 up to 11 tables, as
// on Java 17); within a bucket in statement order.
func dbzTableOrder(tcs []binlog.TableChange) []string {
	capacity := 16
	for want := max(int(float32(len(tcs))/0.75)+1, 16); capacity < want; {
		capacity *= 2
	}
	type entry struct {
		bucket int
		name   string
	}
	es := make([]entry, len(tcs))
	for i := range tcs {
		h := javaStringHash(tcs[i].DB + "." + tcs[i].Table)
		es[i] = entry{int((h ^ h>>16) & uint32(capacity-1)), tcs[i].Table}
	}
	slices.SortStableFunc(es, func(a, b entry) int { return a.bucket - b.bucket })
	names := make([]string, len(es))
	for i := range es {
		names[i] = es[i].name
	}
	return names
}

// javaStringHash is java.lang.String.hashCode of s: over its UTF-16 code
// units, as a 32-bit pattern.
func javaStringHash(s string) uint32 {
	var h uint32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + uint32(hi)
			h = 31*h + uint32(lo)
			continue
		}
		h = 31*h + uint32(r)
	}
	return h
}

// appendDbzSchemaEvent appends one schema-change event of ch: for the
// table changes tcs, with the statement ddl.
func (e *Encoder) appendDbzSchemaEvent(dst []byte, txn *binlog.Txn, ch *binlog.Change, tcs []binlog.TableChange, ddl string) []byte {
	d := e.dbz
	now := e.nowNano()
	if d.opts.schemas {
		dst = append(dst, `{"schema":`...)
		dst = append(dst, e.dbz.conn.changeValueSchema...)
		dst = append(dst, `,"payload":`...)
	}
	db := schemaChangeDB(ch)
	src := *ch
	src.Row = 0
	src.Table = nil
	if all := dbzTableChanges(ch); len(all) > 0 {
		// Every table of the statement, also in each of a split DROP's
		// events, as Debezium lists them.
		src.Table = &binlog.Table{Schema: db, Name: strings.Join(dbzTableOrder(all), ",")}
	} else {
		src.Schema = db
	}
	dst = append(dst, '{')
	dst = e.appendDbzSource(dst, txn, &src, SnapshotFalse, now)
	dst = append(dst, `,"ts_ms":`...)
	dst = strconv.AppendInt(dst, floorDiv(now, 1e6), 10)
	dst = append(dst, `,"databaseName":`...)
	dst = jsonstr.AppendJava(dst, db)
	dst = append(dst, `,"schemaName":null,"ddl":`...)
	dst = jsonstr.AppendJava(dst, ddl)
	dst = append(dst, `,"tableChanges":[`...)
	for i := range tcs {
		tc := &tcs[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":`...)
		dst = jsonstr.AppendJava(dst, tc.Kind)
		dst = append(dst, `,"id":`...)
		dst = jsonstr.AppendJava(dst, dbzTableID(tc.DB, tc.Table))
		dst = append(dst, `,"table":`...)
		if tc.Kind == "DROP" || tc.After == nil {
			dst = append(dst, "null"...)
		} else {
			dst = appendDbzTableDef(dst, tc.After, tc.Def, d.opts.comments)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, ']', '}')
	if d.opts.schemas {
		dst = append(dst, '}')
	}
	return append(dst, '\n')
}

// dbzTableChanges are the table changes of a DDL change as Debezium
// writes them: a rename of one table (RENAME TABLE, ALTER TABLE ...
// RENAME: the history's DROP of the old name and CREATE of the new) is
// one ALTER under the new name, and a DROP
// DATABASE has none (the statement's text tells). Format sluice writes
// the history's.
func dbzTableChanges(ch *binlog.Change) []binlog.TableChange {
	tcs := ch.TableChanges
	switch {
	case len(tcs) == 2 && tcs[0].Kind == "DROP" && tcs[1].Kind == "CREATE" && (startsWith(ch.Query, "RENAME") || startsWith(ch.Query, "ALTER")):
		alter := tcs[1]
		alter.Kind = "ALTER"
		return []binlog.TableChange{alter}
	case startsWith(ch.Query, "DROP", "DATABASE") || startsWith(ch.Query, "DROP", "SCHEMA"):
		return nil
	}
	return tcs
}

// appendDbzTableDef writes Debezium's io.debezium.connector.schema.Table;
// comments (include.schema.comments) writes the table's and columns'
// comments, else they are null.
func appendDbzTableDef(dst []byte, t *binlog.Table, def *binlog.TableDef, comments bool) []byte {
	dst = append(dst, `{"defaultCharsetName":`...)
	if def != nil && def.Charset != "" {
		dst = jsonstr.AppendJava(dst, def.Charset)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"primaryKeyColumnNames":[`...)
	dst = appendKeyNames(dst, t)
	dst = append(dst, `],"columns":[`...)
	for i := range t.Columns {
		c := &t.Columns[i]
		var cd *binlog.ColumnDef
		if def != nil && i < len(def.Columns) {
			cd = &def.Columns[i]
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		name := ""
		length, scale := -1, -1
		if cd != nil {
			name, length, scale = cd.Type, cd.Length, cd.Scale
		} else {
			name = strings.ToUpper(c.TypeName())
			if c.Point {
				name = "POINT" // the spatial column's declared subtype, as Debezium's parser names it
			}
			if c.Unsigned {
				name += " UNSIGNED"
			}
		}
		base := name
		if j := strings.IndexByte(base, ' '); j >= 0 {
			base = base[:j]
		}
		switch base {
		case "ENUM":
			length = 1 // as Debezium's parser sets it
		case "SET":
			length = max(0, 2*len(c.Set)-1) // the members and their commas
		}
		dst = append(dst, `{"name":`...)
		dst = jsonstr.AppendJava(dst, c.Name)
		dst = append(dst, `,"jdbcType":`...)
		dst = strconv.AppendInt(dst, int64(dbzJdbcType(base)), 10)
		dst = append(dst, `,"nativeType":null,"typeName":`...)
		dst = jsonstr.AppendJava(dst, name)
		dst = append(dst, `,"typeExpression":`...)
		dst = jsonstr.AppendJava(dst, name)
		dst = append(dst, `,"charsetName":`...)
		if c.Charset != "" && c.Charset != "binary" {
			dst = jsonstr.AppendJava(dst, c.Charset)
		} else {
			dst = append(dst, "null"...)
		}
		dst = append(dst, `,"length":`...)
		dst = appendOptInt(dst, length)
		dst = append(dst, `,"scale":`...)
		dst = appendOptInt(dst, scale)
		dst = append(dst, `,"position":`...)
		dst = strconv.AppendInt(dst, int64(i+1), 10)
		dst = append(dst, `,"optional":`...)
		dst = strconv.AppendBool(dst, c.Nullable)
		dst = append(dst, `,"autoIncremented":`...)
		dst = strconv.AppendBool(dst, cd != nil && cd.AutoIncrement)
		dst = append(dst, `,"generated":`...)
		dst = strconv.AppendBool(dst, cd != nil && cd.Generated)
		dst = append(dst, `,"comment":`...)
		if comments && cd != nil && cd.Comment != nil {
			dst = jsonstr.AppendJava(dst, *cd.Comment)
		} else {
			dst = append(dst, "null"...)
		}
		dst = append(dst, `,"defaultValueExpression":`...)
		if cd != nil && cd.Default != nil {
			dst = jsonstr.AppendJava(dst, *cd.Default)
		} else {
			dst = append(dst, "null"...)
		}
		dst = append(dst, `,"enumValues":`...)
		members := c.Enum
		if len(c.Set) > 0 {
			members = c.Set
		}
		if len(members) == 0 {
			dst = append(dst, "null"...)
		} else {
			// As the statement's literals, Debezium's text: 'a'.
			quoted := make([]string, len(members))
			for j, m := range members {
				quoted[j] = "'" + strings.ReplaceAll(m, "'", "''") + "'"
			}
			dst = appendStringArray(dst, quoted)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"comment":`...)
	if comments && def != nil && def.Comment != nil {
		dst = jsonstr.AppendJava(dst, *def.Comment)
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, '}')
}

func appendOptInt(dst []byte, n int) []byte {
	if n < 0 {
		return append(dst, "null"...)
	}
	return strconv.AppendInt(dst, int64(n), 10)
}

// dbzJdbcType is the java.sql.Types code Debezium's MySQL DDL parser
// gives a type (MySqlAntlrDdlParser's data type entries).
func dbzJdbcType(base string) int {
	switch base {
	case "CHAR", "ENUM", "SET":
		return 1 // CHAR
	case "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "LONG":
		return 12 // VARCHAR
	case "NCHAR":
		return -15 // NCHAR
	case "NVARCHAR":
		return -9 // NVARCHAR
	case "TINYINT":
		return -6 // TINYINT
	case "SMALLINT":
		return 5 // SMALLINT
	case "MEDIUMINT", "INT", "INTEGER", "YEAR":
		return 4 // INTEGER
	case "BIGINT", "SERIAL":
		return -5 // BIGINT
	case "REAL":
		return 7 // REAL
	case "DOUBLE":
		return 8 // DOUBLE
	case "FLOAT":
		return 6 // FLOAT
	case "DECIMAL", "DEC", "FIXED":
		return 3 // DECIMAL
	case "NUMERIC":
		return 2 // NUMERIC
	case "BIT":
		return -7 // BIT
	case "TIME":
		return 92 // TIME
	case "TIMESTAMP":
		return 2014 // TIMESTAMP_WITH_TIMEZONE
	case "DATETIME":
		return 93 // TIMESTAMP
	case "DATE":
		return 91 // DATE
	case "BINARY":
		return -2 // BINARY
	case "VARBINARY":
		return -3 // VARBINARY
	case "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB":
		return 2004 // BLOB
	case "BOOL", "BOOLEAN":
		return 16 // BOOLEAN
	}
	return 1111 // OTHER: JSON, VECTOR and the spatial types
}

// dbzTableID is Debezium's TableId text, "db"."table" with a '"' in a
// name doubled; format sluice's tableChanges use it too.
func dbzTableID(db, table string) string {
	return `"` + strings.ReplaceAll(db, `"`, `""`) + `"."` + strings.ReplaceAll(table, `"`, `""`) + `"`
}
