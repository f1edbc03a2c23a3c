// Package libslavedb holds the tables of the libslave article's
// benchmark, which `sluice-bench libslave` and `sluice-bench snapshot`
// create and the codec's and snapshot's benchmarks describe: a leaf
// package, so that tests of the packages internal/bench imports can use
// the same definitions.
package libslavedb

// ShortTable creates the article's 3-column short_table (in the current
// database).
const ShortTable = "CREATE TABLE short_table (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, field1 int NOT NULL, field2 int NOT NULL) ENGINE=InnoDB"

// LongTable creates the article's 26-column long_table (in the current
// database).
const LongTable = `CREATE TABLE long_table (
  id int NOT NULL AUTO_INCREMENT PRIMARY KEY,
  field1 timestamp NOT NULL DEFAULT 0,
  field2 timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  field3 enum('a','b','c') NOT NULL DEFAULT 'a',
  field4 enum('a','b','c') NOT NULL DEFAULT 'a',
  field5 varchar(255) NOT NULL,
  field6 int NOT NULL,
  field7 int NOT NULL,
  field8 text NOT NULL,
  field9 set('a','b','c') NOT NULL DEFAULT 'a',
  field10 int unsigned NOT NULL DEFAULT 2,
  field11 double NOT NULL DEFAULT 1.0,
  field12 double NOT NULL DEFAULT 0.0,
  field13 int NOT NULL,
  field14 int NOT NULL,
  field15 int NOT NULL,
  field16 text NOT NULL,
  field17 varchar(255) NOT NULL,
  field18 varchar(255) NOT NULL,
  field19 enum('a','b','c') NOT NULL DEFAULT 'a',
  field20 int NOT NULL DEFAULT 10,
  field21 double NOT NULL,
  field22 double NOT NULL DEFAULT 1.0,
  field23 double NOT NULL DEFAULT 1.0,
  field24 double NOT NULL DEFAULT 1.0,
  field25 text NOT NULL DEFAULT ""
) ENGINE=InnoDB`
