package kafka

import "testing"

// TestKeyHeader: the key-change headers (__debezium.newkey/oldkey) carry
// the key struct without its schema, as Kafka Connect's
// SimpleHeaderConverter writes a Debezium connector's, with and without
// schemas on the topics.
func TestKeyHeader(t *testing.T) {
	for _, tc := range []struct {
		key     string
		schemas bool
		want    string
	}{
		{`{"id":20}`, false, `{"id":20}`},
		{`{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"s.app.t.Key"},"payload":{"id":20}}`, true, `{"id":20}`},
		{`{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"payload"}],"optional":false,"name":"s.app.t.Key"},"payload":{"payload":"a\"b"}}`, true, `{"payload":"a\"b"}`},
	} {
		if got := string(keyHeader([]byte(tc.key), tc.schemas)); got != tc.want {
			t.Errorf("keyHeader(%s, %v) = %s, want %s", tc.key, tc.schemas, got, tc.want)
		}
	}
}
