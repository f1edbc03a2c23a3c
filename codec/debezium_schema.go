package codec

// The schema half of format debezium (JsonConverter's schemas.enable=true):
// Kafka Connect schemas as JsonConverter writes them, members in its order
// (type, fields|items, optional, name, version, doc, parameters, default,
// field). They depend on the table only and are built once per table
// version (dbzState.table).

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/jsonstr"
)

// dbzSourceSchema is the schema of the source block, up to its name:
// io.debezium.connector.<connector>.Source, version 1, the same fields for
// MySQL (Debezium 3.6.1) and MariaDB (Debezium 3.5.0; dbzConnector).
const dbzSourceSchemaFields = `{"type":"struct","fields":[` +
	`{"type":"string","optional":false,"field":"version"},` +
	`{"type":"string","optional":false,"field":"connector"},` +
	`{"type":"string","optional":false,"field":"name"},` +
	`{"type":"int64","optional":false,"field":"ts_ms"},` +
	`{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},"default":"false","field":"snapshot"},` +
	`{"type":"string","optional":false,"field":"db"},` +
	`{"type":"string","optional":true,"field":"sequence"},` +
	`{"type":"int64","optional":true,"field":"ts_us"},` +
	`{"type":"int64","optional":true,"field":"ts_ns"},` +
	`{"type":"string","optional":true,"field":"table"},` +
	`{"type":"int64","optional":false,"field":"server_id"},` +
	`{"type":"string","optional":true,"field":"gtid"},` +
	`{"type":"string","optional":false,"field":"file"},` +
	`{"type":"int64","optional":false,"field":"pos"},` +
	`{"type":"int32","optional":false,"field":"row"},` +
	`{"type":"int64","optional":true,"field":"thread"},` +
	`{"type":"string","optional":true,"field":"query"}` +
	`],"optional":false,"name":"`

// dbzTxnSchema is the schema of the "transaction" block.
const dbzTxnSchema = `{"type":"struct","fields":[` +
	`{"type":"string","optional":false,"field":"id"},` +
	`{"type":"int64","optional":false,"field":"total_order"},` +
	`{"type":"int64","optional":false,"field":"data_collection_order"}` +
	`],"optional":true,"name":"event.block","version":1,"field":"transaction"}`

// dbzSourceSchema is the source block's schema of a connector ("mysql",
// "mariadb").
func dbzSourceSchema(connector string) string {
	return dbzSourceSchemaFields + "io.debezium.connector." + connector + `.Source","version":1,"field":"source"}`
}

// dbzEnvelopeTail is the envelope's fields after the value structs and
// the source block, and the envelope's own attributes up to its name.
func dbzEnvelopeTail(connector string) string {
	return dbzSourceSchema(connector) + dbzEnvelopeTailRest
}

const dbzEnvelopeTailRest = `,` + dbzTxnSchema + `,` +
	`{"type":"string","optional":false,"field":"op"},` +
	`{"type":"int64","optional":true,"field":"ts_ms"},` +
	`{"type":"int64","optional":true,"field":"ts_us"},` +
	`{"type":"int64","optional":true,"field":"ts_ns"}` +
	`],"optional":false,"name":`

// dbzSchemaPrefix is Debezium's record schema prefix: topic prefix,
// database and table joined by dots, made a valid topic name as
// Debezium's topic naming strategy makes it (its schema names are its
// topic's): every character but ASCII letters, digits, '.', '_' and '-'
// becomes '_', one per UTF-16 unit ("中文" is "__", an emoji "__").
// Avro and Schema Registry take these names; they take no '"' or '|'.
func dbzSchemaPrefix(name string, t *binlog.Table) string {
	s := name + "." + t.Schema + "." + t.Name
	clean := true
	for i := 0; i < len(s); i++ {
		if !dbzTopicChar(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	b := make([]byte, 0, len(s))
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf && dbzTopicChar(byte(r)):
			b = append(b, byte(r))
		case r > 0xFFFF: // a surrogate pair in Java's UTF-16
			b = append(b, '_', '_')
		default:
			b = append(b, '_')
		}
	}
	return string(b)
}

func dbzTopicChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// appendEnvelopeSchema appends the schema of a table's change events:
// struct <prefix>.Envelope, version 2.
func (d *dbzState) appendEnvelopeSchema(dst []byte, name string, t *binlog.Table) []byte {
	p := dbzSchemaPrefix(name, t)
	dst = append(dst, `{"type":"struct","fields":[`...)
	for _, f := range [...]string{"before", "after"} {
		dst = d.appendStructSchema(dst, t, nil, true, p+".Value")
		dst = dst[:len(dst)-1]
		dst = append(dst, `,"field":"`...)
		dst = append(dst, f...)
		dst = append(dst, `"},`...)
	}
	dst = append(dst, d.conn.envelopeTail...)
	dst = jsonstr.AppendJava(dst, p+".Envelope")
	return append(dst, `,"version":2}`...)
}

// appendKeySchema appends the schema of a table's keys: struct
// <prefix>.Key of the primary-key columns (nil for a table without one).
func (d *dbzState) appendKeySchema(dst []byte, name string, t *binlog.Table) []byte {
	if len(t.PrimaryKey) == 0 {
		return dst
	}
	return d.appendStructSchema(dst, t, t.PrimaryKey, false, dbzSchemaPrefix(name, t)+".Key")
}

// appendStructSchema appends a struct of the columns of t (those at
// index cols, or all when cols is nil).
func (d *dbzState) appendStructSchema(dst []byte, t *binlog.Table, cols []int, optional bool, name string) []byte {
	dst = append(dst, `{"type":"struct","fields":[`...)
	one := func(n, i int) {
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = d.appendFieldSchema(dst, &t.Columns[i], d.defaultValue(&t.Columns[i]))
	}
	if cols == nil {
		for i := range t.Columns {
			one(i, i)
		}
	} else {
		n := 0
		for _, i := range cols {
			if i >= 0 && i < len(t.Columns) {
				one(n, i)
				n++
			}
		}
	}
	dst = append(dst, `],"optional":`...)
	dst = strconv.AppendBool(dst, optional)
	dst = append(dst, `,"name":`...)
	dst = jsonstr.AppendJava(dst, name)
	return append(dst, '}')
}

// appendFieldSchema appends the schema of one column, as a struct field.
// def is its default as its value is written (nil: none).
func (d *dbzState) appendFieldSchema(dst []byte, col *binlog.Column, def []byte) []byte {
	typ, logical, version, params := d.columnType(col)
	optional := col.Nullable
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ...)
	dst = append(dst, '"')
	switch typ {
	case "array":
		dst = append(dst, `,"items":{"type":"float","optional":false}`...)
	case "struct":
		if col.Point { // Debezium's Point: optional as the column is
			dst = append(dst, `,"fields":[{"type":"double","optional":false,"field":"x"},{"type":"double","optional":false,"field":"y"},{"type":"bytes","optional":true,"field":"wkb"},{"type":"int32","optional":true,"field":"srid"}]`...)
			break
		}
		// Debezium's Geometry schema is always optional.
		dst = append(dst, `,"fields":[{"type":"bytes","optional":false,"field":"wkb"},{"type":"int32","optional":true,"field":"srid"}]`...)
		optional = true
	}
	dst = append(dst, `,"optional":`...)
	dst = strconv.AppendBool(dst, optional)
	if logical != "" {
		dst = append(dst, `,"name":"`...)
		dst = append(dst, logical...)
		dst = append(dst, `","version":`...)
		dst = strconv.AppendInt(dst, int64(version), 10)
	}
	// With include.schema.comments the column's comment is its doc, as
	// Debezium 3.6 writes it (over a spatial type's own).
	switch {
	case d.opts.comments && col.Comment != "":
		dst = append(dst, `,"doc":`...)
		dst = jsonstr.AppendJava(dst, col.Comment)
	case typ == "struct" && col.Point:
		dst = append(dst, `,"doc":"Geometry (POINT)"`...)
	case typ == "struct":
		dst = append(dst, `,"doc":"Geometry"`...)
	}
	if len(params) > 0 {
		dst = append(dst, `,"parameters":{`...)
		for i := 0; i+1 < len(params); i += 2 {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonstr.AppendJava(dst, params[i])
			dst = append(dst, ':')
			dst = jsonstr.AppendJava(dst, params[i+1])
		}
		dst = append(dst, '}')
	}
	if def != nil {
		dst = append(dst, `,"default":`...)
		dst = append(dst, def...)
	}
	dst = append(dst, `,"field":`...)
	dst = jsonstr.AppendJava(dst, col.Name)
	return append(dst, '}')
}

// columnType gives the Kafka Connect type of a column in format debezium,
// its logical name and version ("" and 0 for none) and its parameters as
// key, value pairs.
func (d *dbzState) columnType(col *binlog.Column) (typ, logical string, version int, params []string) {
	switch col.Kind {
	case binlog.KindInt, binlog.KindUint:
		u := col.Kind == binlog.KindUint || col.Unsigned
		switch col.Type {
		case mysql.MYSQL_TYPE_TINY:
			return "int16", "", 0, nil
		case mysql.MYSQL_TYPE_SHORT:
			if u {
				return "int32", "", 0, nil
			}
			return "int16", "", 0, nil
		case mysql.MYSQL_TYPE_INT24:
			return "int32", "", 0, nil
		case mysql.MYSQL_TYPE_LONG:
			if u {
				return "int64", "", 0, nil
			}
			return "int32", "", 0, nil
		}
		if u && d.opts.precise {
			return "bytes", "org.apache.kafka.connect.data.Decimal", 1, []string{"scale", "0", "connect.decimal.precision", "20"}
		}
		return "int64", "", 0, nil
	case binlog.KindYear:
		return "int32", "io.debezium.time.Year", 1, nil
	case binlog.KindBit:
		n := bitLen(col)
		if n == 1 {
			return "boolean", "", 0, nil
		}
		return "bytes", "io.debezium.data.Bits", 1, []string{"length", strconv.Itoa(n)}
	case binlog.KindFloat:
		if col.FloatMD {
			// FLOAT(M,D): Debezium's type for it is a double
			// (Debezium 3.6.1, TestDebeziumOracle).
			return "double", "", 0, nil
		}
		return "float", "", 0, nil
	case binlog.KindDouble:
		return "double", "", 0, nil
	case binlog.KindDecimal:
		switch d.opts.decimal {
		case 's':
			return "string", "", 0, nil
		case 'd':
			return "double", "", 0, nil
		}
		params = []string{"scale", strconv.Itoa(col.Frac)}
		if col.Precision > 0 {
			params = append(params, "connect.decimal.precision", strconv.Itoa(col.Precision))
		}
		return "bytes", "org.apache.kafka.connect.data.Decimal", 1, params
	case binlog.KindDate:
		if d.opts.connect {
			return "int32", "org.apache.kafka.connect.data.Date", 1, nil
		}
		return "int32", "io.debezium.time.Date", 1, nil
	case binlog.KindDateTime:
		switch {
		case d.opts.connect:
			return "int64", "org.apache.kafka.connect.data.Timestamp", 1, nil
		case col.Frac > 3:
			return "int64", "io.debezium.time.MicroTimestamp", 1, nil
		}
		return "int64", "io.debezium.time.Timestamp", 1, nil
	case binlog.KindTimestamp:
		return "string", "io.debezium.time.ZonedTimestamp", 1, nil
	case binlog.KindTime:
		if d.opts.connect {
			return "int32", "org.apache.kafka.connect.data.Time", 1, nil
		}
		return "int64", "io.debezium.time.MicroTime", 1, nil
	case binlog.KindBytes:
		if col.UUID {
			return "string", "io.debezium.data.Uuid", 1, nil
		}
		if d.opts.binary == 'b' {
			return "bytes", "", 0, nil
		}
		return "string", "", 0, nil
	case binlog.KindGeometry:
		if col.Point {
			return "struct", "io.debezium.data.geometry.Point", 1, nil
		}
		return "struct", "io.debezium.data.geometry.Geometry", 1, nil
	case binlog.KindEnum:
		return "string", "io.debezium.data.Enum", 1, []string{"allowed", allowedList(col.Enum)}
	case binlog.KindSet:
		return "string", "io.debezium.data.EnumSet", 1, []string{"allowed", allowedList(col.Set)}
	case binlog.KindJSON:
		if col.Type != mysql.MYSQL_TYPE_JSON {
			// MariaDB's JSON, a LONGTEXT to Debezium's MariaDB connector.
			return "string", "", 0, nil
		}
		return "string", "io.debezium.data.Json", 1, nil
	case binlog.KindVector:
		return "array", "io.debezium.data.FloatVector", 1, nil
	}
	return "string", "", 0, nil // text, and kinds without a schema of their own
}

// allowedList is Debezium's "allowed" parameter: the member names joined
// by commas, a backslash or comma in a name escaped with a backslash.
func allowedList(names []string) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		n = strings.ReplaceAll(n, `\`, `\\`)
		b.WriteString(strings.ReplaceAll(n, ",", `\,`))
	}
	return b.String()
}
