package cdc.storage;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

import io.delta.storage.HadoopFileSystemLogStore;

/**
 * Delta's log store for s3a:// tables that any number of writers may commit to: each commit
 * file is created with a conditional PUT (If-None-Match: *), through Hadoop S3A's conditional
 * create. The object store decides who wins a version, atomically; the loser gets
 * java.nio.file.FileAlreadyExistsException, which Delta turns into a conflict check and a
 * retry at the next version (or a ConcurrentTransactionException for the same txn).
 *
 * Delta's default store for s3a:// (S3SingleDriverLogStore) checks for the file in its own
 * JVM, then PUTs unconditionally: a second driver, or delta-rs (which always commits with a
 * conditional PUT), can lose a commit to it. Set with
 * spark.delta.logStore.s3a.impl=cdc.storage.S3ConditionalLogStore (cdc's session factory
 * does). Needs an S3 API that honours If-None-Match on PUT (AWS S3 does).
 */
public class S3ConditionalLogStore extends HadoopFileSystemLogStore {
    /** Hadoop's createFile option that makes S3A send If-None-Match: *. */
    static final String IF_NONE_MATCH = "fs.option.create.conditional.overwrite";

    public S3ConditionalLogStore(Configuration conf) {
        super(conf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration conf)
            throws IOException {
        FileSystem fs = path.getFileSystem(conf);
        FSDataOutputStream out;
        if (overwrite) {
            out = fs.create(path, true);  // a checkpoint's _last_checkpoint: last writer wins
        } else {
            // overwrite(true): no HEAD probe of S3A's own; the conditional PUT decides
            FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(path).overwrite(true);
            builder.must(IF_NONE_MATCH, true);
            out = builder.build();
        }
        try {
            writeLines(out, actions);  // the PUT happens as the stream closes
        } catch (IOException e) {
            if (!overwrite && lostTheVersion(e)) {
                java.nio.file.FileAlreadyExistsException taken =
                        new java.nio.file.FileAlreadyExistsException(path.toString());
                taken.initCause(e);
                throw taken;
            }
            throw e;
        }
    }

    private static void writeLines(OutputStream out, Iterator<String> actions)
            throws IOException {
        try (OutputStream closing = out) {
            while (actions.hasNext()) {
                closing.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
            }
        }
    }

    /** Whether the store refused the PUT because the file exists (HTTP 412). */
    private static boolean lostTheVersion(Throwable error) {
        for (Throwable t = error; t != null; t = t.getCause()) {
            if (t instanceof org.apache.hadoop.fs.FileAlreadyExistsException) {
                return true;
            }
            if (t.getClass().getName().endsWith("RemoteFileChangedException")) {
                return true;
            }
            String message = String.valueOf(t.getMessage());
            if (message.contains("412") || message.contains("PreconditionFailed")) {
                return true;
            }
        }
        return false;
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration conf) {
        return false;  // an S3 object appears whole or not at all
    }
}
