package binlog

// CivilFromDays converts days since 1970-01-01 to a proleptic Gregorian
// date (Howard Hinnant's civil_from_days).
func CivilFromDays(days int64) (year int64, month, day int) {
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // [0, 365]
	mp := (5*doy + 2) / 153                                // [0, 11]
	day = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		month = int(mp + 3)
	} else {
		month = int(mp - 9)
	}
	year = yoe + era*400
	if month <= 2 {
		year++
	}
	return year, month, day
}

// DaysFromCivil returns the days since 1970-01-01 of a proleptic
// Gregorian date (Howard Hinnant's days_from_civil; the inverse of
// CivilFromDays).
func DaysFromCivil(year int64, month, day int) int64 {
	if month <= 2 {
		year--
	}
	era := year / 400
	if year < 0 && year%400 != 0 {
		era--
	}
	yoe := year - era*400
	mp := int64(month + 9)
	if month > 2 {
		mp = int64(month - 3)
	}
	doy := (153*mp+2)/5 + int64(day) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// UTCDateTime converts a TIMESTAMP (Unix seconds and microseconds) to the
// UTC calendar; the zero timestamp is the zero DATETIME, as the server
// writes it.
func UTCDateTime(sec int64, micro uint32) DateTime {
	if sec == 0 && micro == 0 {
		return DateTime{}
	}
	days, rem := sec/86400, sec%86400
	if rem < 0 {
		days--
		rem += 86400
	}
	y, m, d := CivilFromDays(days)
	return DateTime{
		Date: Date{Year: uint16(y), Month: uint8(m), Day: uint8(d)},
		Hour: uint8(rem / 3600), Minute: uint8(rem / 60 % 60), Second: uint8(rem % 60), Micro: micro,
	}
}
