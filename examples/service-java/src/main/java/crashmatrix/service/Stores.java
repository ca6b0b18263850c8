package crashmatrix.service;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.File;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import org.sqlite.SQLiteConfig;

/**
 * The service's own stores, in one SQLite file of hello's dir through JDBC:
 * the operation journal with each operation's frozen plan (one row, so the
 * two are created in one statement), the document states with their
 * version history, and the entity registry. Records are the store
 * protocol's (docs/store-protocol.md section 4.1), kept as JSON objects.
 * Several processes of a case use the file at once: WAL mode, a busy
 * timeout, and every compare-and-set in an IMMEDIATE transaction.
 */
final class Stores implements AutoCloseable {
    private final Connection c;

    /** Opens dir/service.db; create (a worker) makes its tables, a reader never writes. */
    static Stores open(String dir, boolean create) throws SQLException {
        File f = new File(dir, "service.db");
        if (!create && !f.exists()) {
            return null; // nothing was ever written: every read is empty
        }
        SQLiteConfig cfg = new SQLiteConfig();
        cfg.setBusyTimeout(10000);
        cfg.setTransactionMode(SQLiteConfig.TransactionMode.IMMEDIATE);
        if (create) {
            cfg.setJournalMode(SQLiteConfig.JournalMode.WAL);
        }
        cfg.setSynchronous(SQLiteConfig.SynchronousMode.FULL);
        Connection c = DriverManager.getConnection("jdbc:sqlite:" + f.getPath(), cfg.toProperties());
        Stores s = new Stores(c);
        if (create) {
            s.tx(() -> {
                try (Statement st = c.createStatement()) {
                    st.executeUpdate("CREATE TABLE IF NOT EXISTS ops (operation_id TEXT PRIMARY KEY, space TEXT NOT NULL,"
                            + " document_id TEXT NOT NULL, expected_revision INTEGER NOT NULL, fingerprint TEXT NOT NULL,"
                            + " stage TEXT NOT NULL, updated_at INTEGER NOT NULL, failure_reason TEXT NOT NULL DEFAULT '',"
                            + " attempts INTEGER NOT NULL DEFAULT 0, disposition TEXT NOT NULL DEFAULT '',"
                            + " superseded_by TEXT NOT NULL DEFAULT '', claim_holder TEXT NOT NULL DEFAULT '',"
                            + " claim_expires_at INTEGER NOT NULL DEFAULT 0, plan TEXT NOT NULL)");
                    st.executeUpdate("CREATE TABLE IF NOT EXISTS states (space TEXT NOT NULL, document_id TEXT NOT NULL,"
                            + " revision INTEGER NOT NULL, operation_id TEXT NOT NULL, json TEXT NOT NULL,"
                            + " PRIMARY KEY (space, document_id))");
                    st.executeUpdate("CREATE TABLE IF NOT EXISTS versions (space TEXT NOT NULL, document_id TEXT NOT NULL,"
                            + " revision INTEGER NOT NULL, operation_id TEXT NOT NULL, json TEXT NOT NULL,"
                            + " PRIMARY KEY (space, document_id, revision))");
                    st.executeUpdate("CREATE TABLE IF NOT EXISTS entities (space TEXT NOT NULL, node_id TEXT NOT NULL,"
                            + " type TEXT NOT NULL, canonical_name TEXT NOT NULL, PRIMARY KEY (space, node_id))");
                    st.executeUpdate("CREATE TABLE IF NOT EXISTS bindings (space TEXT NOT NULL, type_key TEXT NOT NULL,"
                            + " name TEXT NOT NULL, node_id TEXT NOT NULL, PRIMARY KEY (space, type_key, name))");
                }
                return null;
            });
        }
        return s;
    }

    private Stores(Connection c) {
        this.c = c;
    }

    @Override
    public void close() throws SQLException {
        c.close();
    }

    interface Work<T> {
        T run() throws SQLException;
    }

    /** Runs work in one IMMEDIATE transaction: all of it commits, or none. */
    <T> T tx(Work<T> work) throws SQLException {
        c.setAutoCommit(false);
        try {
            T t = work.run();
            c.commit();
            return t;
        } catch (SQLException | RuntimeException e) {
            c.rollback();
            throw e;
        } finally {
            c.setAutoCommit(true);
        }
    }

    private PreparedStatement prep(String sql, Object... args) throws SQLException {
        PreparedStatement ps = c.prepareStatement(sql);
        for (int i = 0; i < args.length; i++) {
            ps.setObject(i + 1, args[i]);
        }
        return ps;
    }

    private int update(String sql, Object... args) throws SQLException {
        try (PreparedStatement ps = prep(sql, args)) {
            return ps.executeUpdate();
        }
    }

    private List<JsonObject> jsonRows(String sql, Object... args) throws SQLException {
        List<JsonObject> out = new ArrayList<>();
        try (PreparedStatement ps = prep(sql, args); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(JsonParser.parseString(rs.getString(1)).getAsJsonObject());
            }
        }
        return out;
    }

    // ---- operations: the journal and the frozen plans ----

    private static final String OP_COLUMNS = "operation_id, space, document_id, expected_revision, fingerprint, stage,"
            + " updated_at, failure_reason, attempts, disposition, superseded_by, claim_holder, claim_expires_at";

    private static JsonObject operation(ResultSet rs) throws SQLException {
        JsonObject o = new JsonObject();
        o.addProperty("operationId", rs.getString(1));
        o.addProperty("space", rs.getString(2));
        o.addProperty("documentId", rs.getString(3));
        o.addProperty("expectedRevision", rs.getLong(4));
        o.addProperty("planFingerprint", rs.getString(5));
        o.addProperty("stage", rs.getString(6));
        o.addProperty("updatedAt", rs.getLong(7));
        o.addProperty("failureReason", rs.getString(8));
        o.addProperty("attempts", rs.getInt(9));
        o.addProperty("disposition", rs.getString(10));
        o.addProperty("supersededBy", rs.getString(11));
        if (!rs.getString(12).isEmpty()) {
            o.addProperty("claimHolder", rs.getString(12));
            o.addProperty("claimExpiresAt", rs.getLong(13));
        }
        return o;
    }

    private List<JsonObject> operations(String where, Object... args) throws SQLException {
        List<JsonObject> out = new ArrayList<>();
        try (PreparedStatement ps = prep("SELECT " + OP_COLUMNS + " FROM ops " + where, args); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(operation(rs));
            }
        }
        return out;
    }

    /** prepareOperation's store half: the operation and its plan in one row, first write wins. */
    boolean createOperation(JsonObject op, String plan) throws SQLException {
        return update("INSERT OR IGNORE INTO ops (operation_id, space, document_id, expected_revision, fingerprint, stage,"
                + " updated_at, attempts, plan) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)",
                str(op, "operationId"), str(op, "space"), str(op, "documentId"), op.get("expectedRevision").getAsLong(),
                str(op, "planFingerprint"), str(op, "stage"), op.get("updatedAt").getAsLong(), plan) == 1;
    }

    JsonObject getOperation(String id) throws SQLException {
        List<JsonObject> l = operations("WHERE operation_id = ?", id);
        return l.isEmpty() ? null : l.get(0);
    }

    /** The frozen plan's JSON text and the fingerprint stored with it, or null. */
    String[] getPlan(String id) throws SQLException {
        try (PreparedStatement ps = prep("SELECT plan, fingerprint FROM ops WHERE operation_id = ?", id); ResultSet rs = ps.executeQuery()) {
            return rs.next() ? new String[] {rs.getString(1), rs.getString(2)} : null;
        }
    }

    /** The stage compare-and-set: next's mutable fields replace the stored ones if it still is expected. */
    boolean casOperation(JsonObject expected, JsonObject next) throws SQLException {
        return tx(() -> {
            JsonObject stored = getOperation(str(expected, "operationId"));
            if (stored == null) {
                throw new Proto.ServiceError("not_found", true, "operation " + str(expected, "operationId"));
            }
            for (String f : new String[] {"space", "documentId", "expectedRevision", "planFingerprint", "stage", "attempts", "disposition"}) {
                if (!stored.get(f).equals(expected.get(f))) {
                    return false;
                }
            }
            if (next.get("updatedAt").getAsLong() < stored.get("updatedAt").getAsLong()) {
                throw new Proto.ServiceError("time_backwards", true, "operation " + str(expected, "operationId"));
            }
            update("UPDATE ops SET stage = ?, updated_at = ?, failure_reason = ?, attempts = ?, disposition = ?, superseded_by = ?"
                    + " WHERE operation_id = ?", str(next, "stage"), next.get("updatedAt").getAsLong(), str(next, "failureReason"),
                    next.get("attempts").getAsInt(), str(next, "disposition"), str(next, "supersededBy"), str(next, "operationId"));
            return true;
        });
    }

    /** Unfinished operations of a space, oldest first (the recovery scan). */
    List<JsonObject> recoverable(String space) throws SQLException {
        return operations("WHERE space = ? AND stage <> 'COMPLETED' AND disposition = '' ORDER BY updated_at, operation_id", space);
    }

    List<JsonObject> allOperations() throws SQLException {
        return operations("ORDER BY operation_id");
    }

    boolean claim(String id, String holder, long now, long ttl) throws SQLException {
        return tx(() -> update("UPDATE ops SET claim_holder = ?, claim_expires_at = ? WHERE operation_id = ?"
                + " AND (claim_holder = '' OR claim_holder = ? OR claim_expires_at <= ?)", holder, now + ttl, id, holder, now) == 1);
    }

    void releaseClaim(String id, String holder) throws SQLException {
        update("UPDATE ops SET claim_holder = '', claim_expires_at = 0 WHERE operation_id = ? AND claim_holder = ?", id, holder);
    }

    // ---- document states and their history ----

    JsonObject findCurrent(String space, String doc) throws SQLException {
        List<JsonObject> l = jsonRows("SELECT json FROM states WHERE space = ? AND document_id = ?", space, doc);
        return l.isEmpty() ? null : l.get(0);
    }

    /** The current state if this operation committed it, else the latest version it did. */
    JsonObject findByOperationId(String space, String doc, String op) throws SQLException {
        List<JsonObject> l = jsonRows("SELECT json FROM states WHERE space = ? AND document_id = ? AND operation_id = ?", space, doc, op);
        if (l.isEmpty()) {
            l = jsonRows("SELECT json FROM versions WHERE space = ? AND document_id = ? AND operation_id = ? ORDER BY revision DESC LIMIT 1",
                    space, doc, op);
        }
        return l.isEmpty() ? null : l.get(0);
    }

    /** The revision compare-and-set: next (revision expected+1) becomes current if the current revision is expected. */
    boolean casState(long expected, JsonObject next) throws SQLException {
        String space = str(next, "space"), doc = str(next, "documentId");
        return tx(() -> {
            JsonObject cur = findCurrent(space, doc);
            long rev = cur == null ? 0 : cur.get("revision").getAsLong();
            if (rev != expected) {
                return false;
            }
            update("INSERT OR REPLACE INTO states (space, document_id, revision, operation_id, json) VALUES (?, ?, ?, ?, ?)",
                    space, doc, next.get("revision").getAsLong(), str(next, "operationId"), Proto.GSON.toJson(next));
            return true;
        });
    }

    void recordVersion(JsonObject st) throws SQLException {
        update("INSERT OR IGNORE INTO versions (space, document_id, revision, operation_id, json) VALUES (?, ?, ?, ?, ?)",
                str(st, "space"), str(st, "documentId"), st.get("revision").getAsLong(), str(st, "operationId"), Proto.GSON.toJson(st));
    }

    List<JsonObject> versions(String space, String doc) throws SQLException {
        return jsonRows("SELECT json FROM versions WHERE space = ? AND document_id = ? ORDER BY revision", space, doc);
    }

    List<JsonObject> states(String space) throws SQLException {
        return jsonRows("SELECT json FROM states WHERE space = ? ORDER BY document_id", space);
    }

    /** Whether an ACTIVE current state of another document of space supports edge. */
    boolean referencedByOther(String space, String doc, JsonObject edge) throws SQLException {
        for (JsonObject st : states(space)) {
            if (str(st, "documentId").equals(doc) || !"ACTIVE".equals(str(st, "status")) || !st.has("factSources")) {
                continue;
            }
            for (JsonElement e : st.getAsJsonArray("factSources")) {
                if (Plans.sameEdge(e.getAsJsonObject(), edge)) {
                    return true;
                }
            }
        }
        return false;
    }

    // ---- the entity registry ----

    /** Binds every registration's normalised names to its node, all or none (registry_conflict). */
    void saveAll(String space, JsonArray registrations) throws SQLException {
        tx(() -> {
            for (JsonElement e : registrations) {
                JsonObject r = e.getAsJsonObject();
                String node = str(r, "nodeId"), typeKey = Plans.normalize(str(r, "type"));
                for (String name : Plans.names(r)) {
                    try (PreparedStatement ps = prep("SELECT node_id FROM bindings WHERE space = ? AND type_key = ? AND name = ?", space, typeKey, name);
                            ResultSet rs = ps.executeQuery()) {
                        if (rs.next() && !rs.getString(1).equals(node)) {
                            throw new Proto.ServiceError("registry_conflict", true, name + " is bound to " + rs.getString(1) + ", not " + node);
                        }
                    }
                    update("INSERT OR IGNORE INTO bindings (space, type_key, name, node_id) VALUES (?, ?, ?, ?)", space, typeKey, name, node);
                }
                update("INSERT OR IGNORE INTO entities (space, node_id, type, canonical_name) VALUES (?, ?, ?, ?)",
                        space, node, str(r, "type").trim(), str(r, "canonicalName").trim());
            }
            return null;
        });
    }

    List<JsonObject> registry(String space) throws SQLException {
        List<JsonObject> out = new ArrayList<>();
        try (PreparedStatement ps = prep("SELECT node_id, type, canonical_name FROM entities WHERE space = ? ORDER BY node_id", space);
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                JsonObject o = new JsonObject();
                o.addProperty("space", space);
                o.addProperty("nodeId", rs.getString(1));
                o.addProperty("type", rs.getString(2));
                o.addProperty("canonicalName", rs.getString(3));
                out.add(o);
            }
        }
        for (JsonObject o : out) {
            TreeSet<String> names = new TreeSet<>();
            try (PreparedStatement ps = prep("SELECT name FROM bindings WHERE space = ? AND node_id = ?", space, str(o, "nodeId"));
                    ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    names.add(rs.getString(1));
                }
            }
            JsonArray a = new JsonArray();
            names.forEach(a::add);
            o.add("names", a);
        }
        return out;
    }

    static String str(JsonObject o, String f) {
        JsonElement e = o.get(f);
        return e == null || e.isJsonNull() ? "" : e.getAsString();
    }
}
