// The system's SQLite, for ConcordSQLite on platforms whose SDK has no SQLite3 module.
#include <sqlite3.h>
