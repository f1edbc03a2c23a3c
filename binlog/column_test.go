package binlog

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

func TestResolve(t *testing.T) {
	cases := []struct {
		name string
		in   Column
		want Column // Type, Kind, Frac, Precision, BitLen, Charset checked
	}{
		{"tinyint", Column{BinlogType: mysql.MYSQL_TYPE_TINY}, Column{Type: mysql.MYSQL_TYPE_TINY, Kind: KindInt}},
		{"bigint unsigned", Column{BinlogType: mysql.MYSQL_TYPE_LONGLONG, Unsigned: true}, Column{Type: mysql.MYSQL_TYPE_LONGLONG, Kind: KindUint}},
		{"mediumint unsigned", Column{BinlogType: mysql.MYSQL_TYPE_INT24, Unsigned: true}, Column{Type: mysql.MYSQL_TYPE_INT24, Kind: KindUint}},
		{"float", Column{BinlogType: mysql.MYSQL_TYPE_FLOAT, Meta: 4}, Column{Type: mysql.MYSQL_TYPE_FLOAT, Kind: KindFloat}},
		{"double", Column{BinlogType: mysql.MYSQL_TYPE_DOUBLE, Meta: 8}, Column{Type: mysql.MYSQL_TYPE_DOUBLE, Kind: KindDouble}},
		{"decimal(65,30)", Column{BinlogType: mysql.MYSQL_TYPE_NEWDECIMAL, Meta: 65<<8 | 30}, Column{Type: mysql.MYSQL_TYPE_NEWDECIMAL, Kind: KindDecimal, Precision: 65, Frac: 30}},
		{"date", Column{BinlogType: mysql.MYSQL_TYPE_DATE}, Column{Type: mysql.MYSQL_TYPE_DATE, Kind: KindDate}},
		{"newdate", Column{BinlogType: mysql.MYSQL_TYPE_NEWDATE}, Column{Type: mysql.MYSQL_TYPE_NEWDATE, Kind: KindDate}},
		{"datetime(6)", Column{BinlogType: mysql.MYSQL_TYPE_DATETIME2, Meta: 6}, Column{Type: mysql.MYSQL_TYPE_DATETIME2, Kind: KindDateTime, Frac: 6}},
		{"old datetime", Column{BinlogType: mysql.MYSQL_TYPE_DATETIME}, Column{Type: mysql.MYSQL_TYPE_DATETIME, Kind: KindDateTime}},
		{"timestamp(3)", Column{BinlogType: mysql.MYSQL_TYPE_TIMESTAMP2, Meta: 3}, Column{Type: mysql.MYSQL_TYPE_TIMESTAMP2, Kind: KindTimestamp, Frac: 3}},
		{"old timestamp", Column{BinlogType: mysql.MYSQL_TYPE_TIMESTAMP}, Column{Type: mysql.MYSQL_TYPE_TIMESTAMP, Kind: KindTimestamp}},
		{"time(1)", Column{BinlogType: mysql.MYSQL_TYPE_TIME2, Meta: 1}, Column{Type: mysql.MYSQL_TYPE_TIME2, Kind: KindTime, Frac: 1}},
		{"old time", Column{BinlogType: mysql.MYSQL_TYPE_TIME}, Column{Type: mysql.MYSQL_TYPE_TIME, Kind: KindTime}},
		{"year", Column{BinlogType: mysql.MYSQL_TYPE_YEAR}, Column{Type: mysql.MYSQL_TYPE_YEAR, Kind: KindYear}},
		{"varchar utf8mb4", Column{BinlogType: mysql.MYSQL_TYPE_VARCHAR, Meta: 1020, Collation: 255}, Column{Type: mysql.MYSQL_TYPE_VARCHAR, Kind: KindString, Charset: "utf8mb4"}},
		{"varbinary", Column{BinlogType: mysql.MYSQL_TYPE_VARCHAR, Meta: 20, Collation: 63}, Column{Type: mysql.MYSQL_TYPE_VARCHAR, Kind: KindBytes, Charset: "binary"}},
		{"varbinary by charset name", Column{BinlogType: mysql.MYSQL_TYPE_VARCHAR, Meta: 20, Charset: "binary"}, Column{Type: mysql.MYSQL_TYPE_VARCHAR, Kind: KindBytes, Charset: "binary"}},
		{"varchar unknown charset", Column{BinlogType: mysql.MYSQL_TYPE_VARCHAR, Meta: 20}, Column{Type: mysql.MYSQL_TYPE_VARCHAR, Kind: KindString}},
		{"char latin1", Column{BinlogType: mysql.MYSQL_TYPE_STRING, Meta: 0xfe0a, Collation: 8}, Column{Type: mysql.MYSQL_TYPE_STRING, Kind: KindString, Charset: "latin1"}},
		{"char(255) utf8mb4", Column{BinlogType: mysql.MYSQL_TYPE_STRING, Meta: stringMetaFor(mysql.MYSQL_TYPE_STRING, 1020), Collation: 2304}, Column{Type: mysql.MYSQL_TYPE_STRING, Kind: KindString, Charset: "utf8mb4"}},
		{"binary(16)", Column{BinlogType: mysql.MYSQL_TYPE_STRING, Meta: 0xfe10, Collation: 63}, Column{Type: mysql.MYSQL_TYPE_STRING, Kind: KindBytes, Charset: "binary"}},
		{"enum", Column{BinlogType: mysql.MYSQL_TYPE_STRING, Meta: 0xf701, Collation: 45}, Column{Type: mysql.MYSQL_TYPE_ENUM, Kind: KindEnum}},
		{"enum 2 bytes", Column{BinlogType: mysql.MYSQL_TYPE_STRING, Meta: 0xf702}, Column{Type: mysql.MYSQL_TYPE_ENUM, Kind: KindEnum}},
		{"set 8 bytes", Column{BinlogType: mysql.MYSQL_TYPE_STRING, Meta: 0xf808}, Column{Type: mysql.MYSQL_TYPE_SET, Kind: KindSet}},
		{"text", Column{BinlogType: mysql.MYSQL_TYPE_BLOB, Meta: 2, Collation: 46}, Column{Type: mysql.MYSQL_TYPE_BLOB, Kind: KindString, Charset: "utf8mb4"}},
		{"longblob", Column{BinlogType: mysql.MYSQL_TYPE_BLOB, Meta: 4, Collation: 63}, Column{Type: mysql.MYSQL_TYPE_BLOB, Kind: KindBytes, Charset: "binary"}},
		{"bit(1)", Column{BinlogType: mysql.MYSQL_TYPE_BIT, Meta: 1}, Column{Type: mysql.MYSQL_TYPE_BIT, Kind: KindBit, BitLen: 1}},
		{"bit(64)", Column{BinlogType: mysql.MYSQL_TYPE_BIT, Meta: 8 << 8}, Column{Type: mysql.MYSQL_TYPE_BIT, Kind: KindBit, BitLen: 64}},
		{"bit(13)", Column{BinlogType: mysql.MYSQL_TYPE_BIT, Meta: 1<<8 | 5}, Column{Type: mysql.MYSQL_TYPE_BIT, Kind: KindBit, BitLen: 13}},
		{"json", Column{BinlogType: mysql.MYSQL_TYPE_JSON, Meta: 4}, Column{Type: mysql.MYSQL_TYPE_JSON, Kind: KindJSON}},
		{"geometry", Column{BinlogType: mysql.MYSQL_TYPE_GEOMETRY, Meta: 4}, Column{Type: mysql.MYSQL_TYPE_GEOMETRY, Kind: KindGeometry}},
		{"vector", Column{BinlogType: mysql.MYSQL_TYPE_VECTOR, Meta: 4}, Column{Type: mysql.MYSQL_TYPE_VECTOR, Kind: KindVector}},
	}
	for _, c := range cases {
		col := c.in
		if err := col.Resolve(); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		w := c.want
		if col.Type != w.Type || col.Kind != w.Kind || col.Frac != w.Frac || col.Precision != w.Precision ||
			col.BitLen != w.BitLen || col.Charset != w.Charset {
			t.Errorf("%s: got type %d kind %v frac %d prec %d bits %d charset %q; want type %d kind %v frac %d prec %d bits %d charset %q",
				c.name, col.Type, col.Kind, col.Frac, col.Precision, col.BitLen, col.Charset,
				w.Type, w.Kind, w.Frac, w.Precision, w.BitLen, w.Charset)
		}
		// Resolve is idempotent.
		again := col
		if err := again.Resolve(); err != nil || again.Kind != col.Kind || again.Type != col.Type {
			t.Errorf("%s: second Resolve changed the column: %v", c.name, err)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	bad := []Column{
		{Name: "old_decimal", BinlogType: mysql.MYSQL_TYPE_DECIMAL},
		{Name: "unknown", BinlogType: 0x42},
		{Name: "tiny_blob", BinlogType: mysql.MYSQL_TYPE_TINY_BLOB},
		{Name: "fsp7", BinlogType: mysql.MYSQL_TYPE_DATETIME2, Meta: 7},
		{Name: "dec0", BinlogType: mysql.MYSQL_TYPE_NEWDECIMAL, Meta: 0},
		{Name: "dec66", BinlogType: mysql.MYSQL_TYPE_NEWDECIMAL, Meta: 66 << 8},
		{Name: "scale_gt_prec", BinlogType: mysql.MYSQL_TYPE_NEWDECIMAL, Meta: 5<<8 | 6},
		{Name: "blob5", BinlogType: mysql.MYSQL_TYPE_BLOB, Meta: 5},
		{Name: "json0", BinlogType: mysql.MYSQL_TYPE_JSON, Meta: 0},
		{Name: "bit0", BinlogType: mysql.MYSQL_TYPE_BIT, Meta: 0},
		{Name: "bit65", BinlogType: mysql.MYSQL_TYPE_BIT, Meta: 8<<8 | 1},
		{Name: "enum3", BinlogType: mysql.MYSQL_TYPE_STRING, Meta: 0xf703},
		{Name: "set9", BinlogType: mysql.MYSQL_TYPE_STRING, Meta: 0xf809},
		{Name: "char_real_long", BinlogType: mysql.MYSQL_TYPE_STRING, Meta: 0x3f10},
	}
	for _, c := range bad {
		err := c.Resolve()
		if !errors.Is(err, ErrUnsupportedColumn) || !strings.Contains(err.Error(), c.Name) {
			t.Errorf("%s: err = %v", c.Name, err)
		}
	}
	c := Column{Name: "x", BinlogType: 0x42}
	if err := c.Resolve(); !strings.Contains(err.Error(), "66") {
		t.Errorf("the error should name the type code: %v", err)
	}
}

func TestStringMeta(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, 511, 512, 767, 768, 1020, 1023} {
		real, l := stringMeta(stringMetaFor(mysql.MYSQL_TYPE_STRING, n))
		if real != mysql.MYSQL_TYPE_STRING || l != n {
			t.Errorf("CHAR of %d bytes: real %d, length %d", n, real, l)
		}
	}
	if real, l := stringMeta(stringMetaFor(mysql.MYSQL_TYPE_ENUM, 2)); real != mysql.MYSQL_TYPE_ENUM || l != 2 {
		t.Errorf("ENUM: real %d, length %d", real, l)
	}
}

// mariadbCollations lists every collation id below 2048 of MariaDB 10.11
// (SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY).
const mariadbCollations = `
1:big5 2:latin2 3:dec8 4:cp850 5:latin1 6:hp8 7:koi8r 8:latin1 9:latin2 10:swe7 11:ascii 12:ujis
	13:sjis 14:cp1251 15:latin1 16:hebrew 18:tis620 19:euckr 20:latin7 21:latin2 22:koi8u 23:cp1251 24:gb2312 25:greek
	26:cp1250 27:latin2 28:gbk 29:cp1257 30:latin5 31:latin1 32:armscii8 33:utf8mb3 34:cp1250 35:ucs2 36:cp866 37:keybcs2
	38:macce 39:macroman 40:cp852 41:latin7 42:latin7 43:macce 44:cp1250 45:utf8mb4 46:utf8mb4 47:latin1 48:latin1 49:latin1
	50:cp1251 51:cp1251 52:cp1251 53:macroman 54:utf16 55:utf16 56:utf16le 57:cp1256 58:cp1257 59:cp1257 60:utf32 61:utf32
	62:utf16le 63:binary 64:armscii8 65:ascii 66:cp1250 67:cp1256 68:cp866 69:dec8 70:greek 71:hebrew 72:hp8 73:keybcs2
	74:koi8r 75:koi8u 77:latin2 78:latin5 79:latin7 80:cp850 81:cp852 82:swe7 83:utf8mb3 84:big5 85:euckr 86:gb2312
	87:gbk 88:sjis 89:tis620 90:ucs2 91:ujis 92:geostd8 93:geostd8 94:latin1 95:cp932 96:cp932 97:eucjpms 98:eucjpms
	99:cp1250 101:utf16 102:utf16 103:utf16 104:utf16 105:utf16 106:utf16 107:utf16 108:utf16 109:utf16 110:utf16 111:utf16
	112:utf16 113:utf16 114:utf16 115:utf16 116:utf16 117:utf16 118:utf16 119:utf16 120:utf16 121:utf16 122:utf16 123:utf16
	124:utf16 128:ucs2 129:ucs2 130:ucs2 131:ucs2 132:ucs2 133:ucs2 134:ucs2 135:ucs2 136:ucs2 137:ucs2 138:ucs2
	139:ucs2 140:ucs2 141:ucs2 142:ucs2 143:ucs2 144:ucs2 145:ucs2 146:ucs2 147:ucs2 148:ucs2 149:ucs2 150:ucs2
	151:ucs2 159:ucs2 160:utf32 161:utf32 162:utf32 163:utf32 164:utf32 165:utf32 166:utf32 167:utf32 168:utf32 169:utf32
	170:utf32 171:utf32 172:utf32 173:utf32 174:utf32 175:utf32 176:utf32 177:utf32 178:utf32 179:utf32 180:utf32 181:utf32
	182:utf32 183:utf32 192:utf8mb3 193:utf8mb3 194:utf8mb3 195:utf8mb3 196:utf8mb3 197:utf8mb3 198:utf8mb3 199:utf8mb3 200:utf8mb3 201:utf8mb3
	202:utf8mb3 203:utf8mb3 204:utf8mb3 205:utf8mb3 206:utf8mb3 207:utf8mb3 208:utf8mb3 209:utf8mb3 210:utf8mb3 211:utf8mb3 212:utf8mb3 213:utf8mb3
	214:utf8mb3 215:utf8mb3 223:utf8mb3 224:utf8mb4 225:utf8mb4 226:utf8mb4 227:utf8mb4 228:utf8mb4 229:utf8mb4 230:utf8mb4 231:utf8mb4 232:utf8mb4
	233:utf8mb4 234:utf8mb4 235:utf8mb4 236:utf8mb4 237:utf8mb4 238:utf8mb4 239:utf8mb4 240:utf8mb4 241:utf8mb4 242:utf8mb4 243:utf8mb4 244:utf8mb4
	245:utf8mb4 246:utf8mb4 247:utf8mb4 576:utf8mb3 577:utf8mb3 578:utf8mb3 608:utf8mb4 609:utf8mb4 610:utf8mb4 640:ucs2 641:ucs2 642:ucs2
	672:utf16 673:utf16 674:utf16 736:utf32 737:utf32 738:utf32 1025:big5 1027:dec8 1028:cp850 1030:hp8 1031:koi8r 1032:latin1
	1033:latin2 1034:swe7 1035:ascii 1036:ujis 1037:sjis 1040:hebrew 1042:tis620 1043:euckr 1046:koi8u 1048:gb2312 1049:greek 1050:cp1250
	1052:gbk 1054:latin5 1056:armscii8 1057:utf8mb3 1059:ucs2 1060:cp866 1061:keybcs2 1062:macce 1063:macroman 1064:cp852 1065:latin7 1067:macce
	1069:utf8mb4 1070:utf8mb4 1071:latin1 1074:cp1251 1075:cp1251 1077:macroman 1078:utf16 1079:utf16 1080:utf16le 1081:cp1256 1082:cp1257 1083:cp1257
	1084:utf32 1085:utf32 1086:utf16le 1088:armscii8 1089:ascii 1090:cp1250 1091:cp1256 1092:cp866 1093:dec8 1094:greek 1095:hebrew 1096:hp8
	1097:keybcs2 1098:koi8r 1099:koi8u 1101:latin2 1102:latin5 1103:latin7 1104:cp850 1105:cp852 1106:swe7 1107:utf8mb3 1108:big5 1109:euckr
	1110:gb2312 1111:gbk 1112:sjis 1113:tis620 1114:ucs2 1115:ujis 1116:geostd8 1117:geostd8 1119:cp932 1120:cp932 1121:eucjpms 1122:eucjpms
	1125:utf16 1147:utf16 1152:ucs2 1174:ucs2 1184:utf32 1206:utf32 1216:utf8mb3 1238:utf8mb3 1248:utf8mb4 1270:utf8mb4
`

func TestCharsetOfCollation(t *testing.T) {
	n := 0
	for _, f := range strings.Fields(mariadbCollations) {
		idText, cs, _ := strings.Cut(f, ":")
		id, _ := strconv.ParseUint(idText, 10, 64)
		if got := CharsetOfCollation(id); got != cs {
			t.Errorf("collation %d: %q, want %q", id, got, cs)
		}
		n++
	}
	if n < 300 {
		t.Fatalf("only %d collations listed", n)
	}
	for id, want := range map[uint64]string{
		// MySQL 8 only.
		76: "utf8mb3", 248: "gb18030", 250: "gb18030", 255: "utf8mb4", 309: "utf8mb4", 323: "utf8mb4",
		// MariaDB uca1400 (10.10+): 2048 + 256*charset + variant.
		2048: "utf8mb3", 2247: "utf8mb3", 2304: "utf8mb4", 2503: "utf8mb4", 2560: "ucs2", 2816: "utf16", 3072: "utf32", 3271: "utf32",
		// Unknown.
		0: "", 17: "", 100: "", 251: "", 324: "", 1024: "", 1100: "", 1279: "", 2047: "", 3328: "", 1 << 40: "",
	} {
		if got := CharsetOfCollation(id); got != want {
			t.Errorf("collation %d: %q, want %q", id, got, want)
		}
	}
}
