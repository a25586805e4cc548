// The PostgreSQL JDBC driver (pgjdbc) against Weir: PreparedStatement parameters and typed
// getters, batches, server-side prepared statements (after prepareThreshold executions),
// fetch sizes (portals read a few rows at a time), transactions, CopyManager, and the
// DatabaseMetaData calls GUI tools such as DBeaver make first (getTables, getColumns,
// getPrimaryKeys, getSchemas).
//
// Run with `java -cp postgresql.jar Jdbc.java`; connection from PGHOST, PGPORT, PGUSER,
// PGDATABASE.

import java.io.StringReader;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.time.LocalDate;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

import org.postgresql.PGConnection;
import org.postgresql.copy.CopyManager;

public class Jdbc {
    static final String CLIENT = "jdbc";
    static final String T = "jdbc_orders";
    static final String V = "jdbc_by_customer";
    static final String COLS = "id, customer, qty, price, paid, placed, day";
    static final String INSERT = "INSERT INTO " + T + " (" + COLS + ") VALUES (?, ?, ?, ?, ?, ?, ?)";

    static final Object[][] ROWS = {
        {1L, "ada", 3, new BigDecimal("2.50"), true, OffsetDateTime.of(2024, 3, 1, 10, 0, 0, 0, ZoneOffset.UTC), LocalDate.of(2024, 3, 1)},
        {2L, "bob", 5, new BigDecimal("10.00"), false, OffsetDateTime.of(2024, 3, 2, 11, 30, 0, 0, ZoneOffset.UTC), LocalDate.of(2024, 3, 2)},
        {3L, "ada", 7, new BigDecimal("1.25"), true, OffsetDateTime.of(2024, 3, 3, 12, 45, 0, 0, ZoneOffset.UTC), LocalDate.of(2024, 3, 3)},
    };

    interface Check {
        void run() throws Exception;
    }

    static Connection conn;

    static String env(String name, String fallback) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? fallback : v;
    }

    static void eq(Object actual, Object expected, String what) {
        if (!Objects.equals(actual, expected)) {
            throw new AssertionError(what + ": got " + show(actual) + ", expected " + show(expected));
        }
    }

    static String show(Object v) {
        return v == null ? "null" : v + " (" + v.getClass().getSimpleName() + ")";
    }

    static String reason(Throwable e) {
        String msg = String.valueOf(e.getMessage()).split("\n")[0];
        if (e instanceof SQLException) {
            String state = ((SQLException) e).getSQLState();
            msg = (state == null ? "" : state + " ") + msg;
        } else if (!(e instanceof AssertionError)) {
            msg = e.getClass().getSimpleName() + ": " + msg;
        }
        return msg.length() > 300 ? msg.substring(0, 300) : msg;
    }

    static Object scalar(String sql) throws SQLException {
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            rs.next();
            return rs.getObject(1);
        }
    }

    static void bind(PreparedStatement ps, Object[] row) throws SQLException {
        ps.setLong(1, (Long) row[0]);
        ps.setString(2, (String) row[1]);
        ps.setInt(3, (Integer) row[2]);
        ps.setBigDecimal(4, (BigDecimal) row[3]);
        ps.setBoolean(5, (Boolean) row[4]);
        ps.setObject(6, row[5]);
        ps.setObject(7, row[6]);
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://" + env("PGHOST", "127.0.0.1") + ":" + env("PGPORT", "9347")
                + "/" + env("PGDATABASE", "weir");
        Map<String, Check> checks = new java.util.LinkedHashMap<>();

        checks.put("connect", () -> {
            conn = DriverManager.getConnection(url, env("PGUSER", "weir"), "");
            eq(conn.getMetaData().getDatabaseProductName(), "PostgreSQL", "product name");
            if (conn.getMetaData().getDatabaseMajorVersion() < 10) {
                throw new AssertionError("server version " + conn.getMetaData().getDatabaseProductVersion());
            }
        });
        checks.put("select_int4_literal", () -> {
            try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT 1 AS one")) {
                eq(rs.getMetaData().getColumnType(1), Types.INTEGER, "java.sql.Types of SELECT 1");
                rs.next();
                eq(rs.getObject(1), 1, "SELECT 1");
            }
        });
        checks.put("create_table", () -> {
            try (Statement st = conn.createStatement()) {
                st.execute("DROP TABLE IF EXISTS " + T + " CASCADE");
                st.execute("CREATE TABLE " + T + " (id BIGINT PRIMARY KEY, customer TEXT NOT NULL, qty INTEGER, "
                        + "price NUMERIC(10,2), paid BOOLEAN, placed TIMESTAMPTZ, day DATE)");
            }
            eq(scalar("SELECT count(*) FROM " + T), 0L, "rows in the new table");
        });
        checks.put("batch_insert", () -> {
            try (PreparedStatement ps = conn.prepareStatement(INSERT)) {
                for (Object[] row : ROWS) {
                    bind(ps, row);
                    ps.addBatch();
                }
                int[] counts = ps.executeBatch();
                eq(counts.length, 3, "batch results");
            }
            eq(scalar("SELECT count(*) FROM " + T), 3L, "rows");
        });
        checks.put("select_typed_params", () -> {
            try (PreparedStatement ps = conn.prepareStatement("SELECT " + COLS + " FROM " + T
                    + " WHERE customer = ? AND qty >= ? AND placed < ? ORDER BY id")) {
                ps.setString(1, "ada");
                ps.setInt(2, 3);
                ps.setObject(3, OffsetDateTime.of(2024, 3, 10, 0, 0, 0, 0, ZoneOffset.UTC));
                try (ResultSet rs = ps.executeQuery()) {
                    for (Object[] want : new Object[][] {ROWS[0], ROWS[2]}) {
                        if (!rs.next()) {
                            throw new AssertionError("fewer than 2 rows");
                        }
                        eq(rs.getObject(1), want[0], "id");
                        eq(rs.getObject(2), want[1], "customer");
                        eq(rs.getObject(3), want[2], "qty");
                        eq(rs.getObject(4), want[3], "price");
                        eq(rs.getObject(5), want[4], "paid");
                        eq(rs.getObject(6, OffsetDateTime.class).toInstant(), ((OffsetDateTime) want[5]).toInstant(), "placed");
                        eq(rs.getObject(7, LocalDate.class), want[6], "day");
                    }
                    eq(rs.next(), false, "more than 2 rows");
                }
            }
        });
        checks.put("aggregate", () -> {
            try (Statement st = conn.createStatement();
                    ResultSet rs = st.executeQuery("SELECT sum(qty * price), sum(qty), count(*) FROM " + T)) {
                rs.next();
                // 3 * 2.50 + 5 * 10.00 + 7 * 1.25 = 66.25
                eq(rs.getBigDecimal(1).compareTo(new BigDecimal("66.25")), 0, "sum(qty * price) = " + rs.getBigDecimal(1));
                eq(rs.getObject(2), 15L, "sum(qty)");
                eq(rs.getObject(3), 3L, "count(*)");
            }
        });
        checks.put("materialized_view", () -> {
            try (Statement st = conn.createStatement()) {
                st.execute("CREATE MATERIALIZED VIEW " + V + " AS SELECT customer, count(*) AS n, sum(qty) AS qty FROM "
                        + T + " WHERE id < 10 GROUP BY customer");
            }
            try (PreparedStatement ps = conn.prepareStatement(INSERT)) {
                bind(ps, new Object[] {4L, "bob", 11, new BigDecimal("3.00"), false,
                    OffsetDateTime.of(2024, 3, 4, 0, 0, 0, 0, ZoneOffset.UTC), LocalDate.of(2024, 3, 4)});
                ps.executeUpdate();
            }
            List<String> got = new ArrayList<>();
            try (Statement st = conn.createStatement()) {
                st.execute("FLUSH");
                try (ResultSet rs = st.executeQuery("SELECT customer, n, qty FROM " + V + " ORDER BY customer")) {
                    while (rs.next()) {
                        got.add(rs.getString(1) + ":" + rs.getLong(2) + ":" + rs.getLong(3));
                    }
                }
            }
            eq(got.toString(), "[ada:2:10, bob:2:16]", "view rows");
        });
        checks.put("limit_param", () -> {
            List<Long> ids = new ArrayList<>();
            try (PreparedStatement ps = conn.prepareStatement("SELECT id FROM " + T + " ORDER BY id LIMIT ?")) {
                ps.setInt(1, 2);
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        ids.add(rs.getLong(1));
                    }
                }
            }
            eq(ids.toString(), "[1, 2]", "first two ids");
        });
        checks.put("timestamp_param", () -> {
            // setTimestamp is sent with no type (timestamp or timestamptz: the server decides).
            try (PreparedStatement ps = conn.prepareStatement("SELECT count(*) FROM " + T + " WHERE placed < ?")) {
                ps.setTimestamp(1, java.sql.Timestamp.from(java.time.Instant.parse("2024-03-02T12:00:00Z")));
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    eq(rs.getLong(1), 2L, "orders placed before March 2, 12:00");
                }
            }
        });
        checks.put("server_prepared", () -> {
            // pgjdbc names the statement on the server from the 5th execution on.
            long total = 0;
            try (PreparedStatement ps = conn.prepareStatement("SELECT qty FROM " + T + " WHERE id = ?")) {
                for (int i = 0; i < 8; i++) {
                    ps.setLong(1, 1 + i % 3);
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        total += rs.getInt(1);
                    }
                }
            }
            // ids 1,2,3,1,2,3,1,2: 3+5+7+3+5+7+3+5
            eq(total, 38L, "sum of qty over 8 executions");
        });
        checks.put("get_tables", () -> {
            DatabaseMetaData md = conn.getMetaData();
            Map<String, String> types = new TreeMap<>();
            try (ResultSet rs = md.getTables(null, "public", "jdbc%", null)) {
                while (rs.next()) {
                    types.put(rs.getString("TABLE_NAME"), rs.getString("TABLE_TYPE"));
                }
            }
            eq(types.toString(), "{" + V + "=MATERIALIZED VIEW, " + T + "=TABLE, " + T + "_pkey=INDEX}",
                    "tables and their types (with the primary key's index, as PostgreSQL lists it)");
        });
        checks.put("get_columns", () -> {
            List<String> got = new ArrayList<>();
            try (ResultSet rs = conn.getMetaData().getColumns(null, "public", T, "%")) {
                while (rs.next()) {
                    got.add(rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME") + " " + rs.getInt("DATA_TYPE")
                            + " " + rs.getString("IS_NULLABLE"));
                }
            }
            eq(String.join(", ", got), "id int8 " + Types.BIGINT + " NO, customer text " + Types.VARCHAR + " NO, qty int4 "
                    + Types.INTEGER + " YES, price numeric " + Types.NUMERIC + " YES, paid bool " + Types.BIT + " YES, placed timestamptz "
                    + Types.TIMESTAMP + " YES, day date " + Types.DATE + " YES", "columns");
        });
        checks.put("get_primary_keys", () -> {
            List<String> got = new ArrayList<>();
            try (ResultSet rs = conn.getMetaData().getPrimaryKeys(null, "public", T)) {
                while (rs.next()) {
                    got.add(rs.getString("COLUMN_NAME") + ":" + rs.getInt("KEY_SEQ"));
                }
            }
            eq(got.toString(), "[id:1]", "primary key columns");
        });
        checks.put("get_schemas", () -> {
            List<String> got = new ArrayList<>();
            try (ResultSet rs = conn.getMetaData().getSchemas()) {
                while (rs.next()) {
                    got.add(rs.getString("TABLE_SCHEM"));
                }
            }
            if (!got.contains("public")) {
                throw new AssertionError("public not in " + got);
            }
        });
        checks.put("transaction_commit", () -> {
            conn.setAutoCommit(false);
            try (PreparedStatement ps = conn.prepareStatement(INSERT)) {
                bind(ps, new Object[] {20L, "dee", 4, new BigDecimal("0.50"), true, null, null});
                ps.executeUpdate();
                conn.commit();
            } finally {
                conn.setAutoCommit(true);
            }
            eq(scalar("SELECT count(*) FROM " + T + " WHERE id = 20"), 1L, "committed row");
        });
        checks.put("transaction_rollback", () -> {
            conn.setAutoCommit(false);
            try (PreparedStatement ps = conn.prepareStatement(INSERT)) {
                bind(ps, new Object[] {21L, "dee", 4, new BigDecimal("0.50"), true, null, null});
                ps.executeUpdate();
                conn.rollback();
            } finally {
                conn.setAutoCommit(true);
            }
            eq(scalar("SELECT count(*) FROM " + T + " WHERE id = 21"), 0L, "rows left by a rolled-back insert");
        });
        checks.put("fetch_size", () -> {
            // With autocommit off and a fetch size, pgjdbc reads the portal 2 rows at a time.
            conn.setAutoCommit(false);
            List<Long> ids = new ArrayList<>();
            try (PreparedStatement ps = conn.prepareStatement("SELECT id FROM " + T + " WHERE id <= ? ORDER BY id")) {
                ps.setFetchSize(2);
                ps.setLong(1, 4);
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        ids.add(rs.getLong(1));
                    }
                }
                conn.commit();
            } finally {
                conn.setAutoCommit(true);
            }
            eq(ids.toString(), "[1, 2, 3, 4]", "ids read 2 at a time");
        });
        checks.put("copy_in", () -> {
            CopyManager copy = conn.unwrap(PGConnection.class).getCopyAPI();
            long n = copy.copyIn("COPY " + T + " (id, customer, qty) FROM STDIN WITH (FORMAT csv)",
                    new StringReader("30,eve,2\n31,eve,6\n"));
            eq(n, 2L, "rows copied");
            eq(scalar("SELECT sum(qty) FROM " + T + " WHERE customer = 'eve'"), 8L, "eve's sum(qty)");
        });
        checks.put("copy_out", () -> {
            CopyManager copy = conn.unwrap(PGConnection.class).getCopyAPI();
            StringWriter out = new StringWriter();
            copy.copyOut("COPY (SELECT id, qty FROM " + T + " WHERE id <= 3 ORDER BY id) TO STDOUT WITH (FORMAT csv)", out);
            eq(out.toString(), "1,3\n2,5\n3,7\n", "copied CSV");
        });

        for (Map.Entry<String, Check> c : checks.entrySet()) {
            try {
                c.getValue().run();
                System.out.println("PASS " + CLIENT + " " + c.getKey());
            } catch (Throwable e) {
                System.out.println("FAIL " + CLIENT + " " + c.getKey() + ": " + reason(e));
                if (conn == null) {
                    break;
                }
                try {
                    if (!conn.getAutoCommit()) {
                        conn.rollback();
                        conn.setAutoCommit(true);
                    }
                } catch (SQLException ignored) {
                    // the next check reports a broken connection
                }
            }
        }
        if (conn != null) {
            conn.close();
        }
        System.out.flush();
        System.exit(0);
    }
}
