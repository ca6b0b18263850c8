import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.HexFormat;

/**
 * Starts Neo4j Community in this JVM (org.neo4j.server.CommunityEntryPoint, the class
 * bin/neo4j starts) after writing the initial password, as `neo4j-admin dbms
 * set-initial-password` would, without a second JVM for neo4j-admin.
 *
 * Environment: CRASHMATRIX_NEO4J_INITIAL_PASSWORD (set by docker-entrypoint.sh from
 * NEO4J_AUTH=neo4j/PASSWORD), NEO4J_HOME. Arguments are passed to CommunityEntryPoint.
 *
 * data/dbms/auth.ini holds "neo4j:SHA-256,HASH,SALT,1024:" where HASH is SHA-256 over
 * SALT||password, then re-hashed 1023 times (Neo4j's SecureHasher); Neo4j imports it into
 * the system database when that database is created on first start.
 */
public final class Launcher {
    private static final int ITERATIONS = 1024;

    public static void main(String[] args) throws Exception {
        String password = System.getenv("CRASHMATRIX_NEO4J_INITIAL_PASSWORD");
        if (password != null && !password.isEmpty()) {
            String home = System.getenv().getOrDefault("NEO4J_HOME", "/var/lib/neo4j");
            writeInitialPassword(Paths.get(home, "data", "dbms", "auth.ini"), password);
        }
        Class<?> entry = Class.forName("org.neo4j.server.CommunityEntryPoint");
        Method main = entry.getMethod("main", String[].class);
        main.invoke(null, (Object) args);
    }

    static void writeInitialPassword(Path authIni, String password)
            throws IOException, NoSuchAlgorithmException {
        Path systemDb = authIni.getParent().getParent().resolve("databases").resolve("system");
        if (Files.exists(systemDb)) {
            return; // not the first start: the password lives in the system database now
        }
        byte[] salt = new byte[32];
        new SecureRandom().nextBytes(salt);
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        sha.update(salt);
        byte[] hash = sha.digest(password.getBytes(StandardCharsets.UTF_8));
        for (int i = 1; i < ITERATIONS; i++) {
            sha.reset();
            hash = sha.digest(hash);
        }
        HexFormat hex = HexFormat.of();
        String line = "neo4j:SHA-256," + hex.formatHex(hash) + "," + hex.formatHex(salt) + "," + ITERATIONS + ":\n";
        Files.createDirectories(authIni.getParent());
        Files.writeString(authIni, line, StandardCharsets.UTF_8);
        System.out.println("Changed password for user 'neo4j'.");
    }
}
