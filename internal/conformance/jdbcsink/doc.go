// Package jdbcsink holds the test that a real Debezium consumer
// reproduces the source's tables from sluice's topics: Debezium's JDBC
// sink connector, in a Kafka Connect worker (throwaway.StartConnect),
// reads what `sluice run` writes in format debezium (schemas on) to a real
// Kafka broker and writes PostgreSQL 15 (throwaway.StartPostgres); the
// PostgreSQL tables are then compared with the MariaDB and MySQL tables
// row by row, column by column (see jdbcsink_test.go and docs/FORMAT.md).
// A package of its own so that it runs beside the others under go test.
package jdbcsink
