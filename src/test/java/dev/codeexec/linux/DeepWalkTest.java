package dev.codeexec.linux;

import dev.codeexec.testing.Trees;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link DeepWalk#deleteTree}, the server's one way to delete a tree: whatever a sandboxed program left there (links
 * to elsewhere, special files, a chain deeper than PATH_MAX, directories without write permission), it removes the
 * tree and never what a link points to.
 */
class DeepWalkTest {

    @TempDir
    Path tmp;

    @AfterEach
    void removeWhatATestLeft() throws Exception {
        Trees.clear(tmp);
    }

    @Test
    void aTreeGoesAndWhatItsLinksPointToStays() throws Exception {
        Path outside = Files.createDirectories(tmp.resolve("outside"));
        Files.writeString(outside.resolve("keep.txt"), "keep");
        Path tree = Files.createDirectories(tmp.resolve("tree/a/b"));
        Files.writeString(tree.resolve("f.txt"), "x");
        Files.createSymbolicLink(tmp.resolve("tree/a/to-dir"), outside);
        Files.createSymbolicLink(tmp.resolve("tree/to-file"), outside.resolve("keep.txt"));
        Posix.mkfifo(tmp.resolve("tree/a/fifo").toString(), 0600);
        // a program may leave a directory it cannot write (or read) itself
        Files.setPosixFilePermissions(tmp.resolve("tree/a/b"), PosixFilePermissions.fromString("r-x------"));

        DeepWalk.deleteTree(tmp.resolve("tree"));

        assertThat(tmp.resolve("tree")).doesNotExist();
        assertThat(outside.resolve("keep.txt")).hasContent("keep");
    }

    @Test
    void aLinkAtTheTopIsRemovedItselfAndItsTargetStays() throws Exception {
        Path target = Files.createDirectories(tmp.resolve("target"));
        Files.writeString(target.resolve("keep.txt"), "keep");
        Path link = Files.createSymbolicLink(tmp.resolve("link"), target);

        DeepWalk.deleteTree(link);

        assertThat(Files.exists(link, LinkOption.NOFOLLOW_LINKS)).isFalse();
        assertThat(target.resolve("keep.txt")).hasContent("keep");
    }

    @Test
    void aFileASpecialFileAndNothingAreDeletedAlike() throws Exception {
        Path file = Files.writeString(tmp.resolve("file"), "x");
        Path fifo = tmp.resolve("fifo");
        Posix.mkfifo(fifo.toString(), 0600);

        DeepWalk.deleteTree(file);
        DeepWalk.deleteTree(fifo);
        DeepWalk.deleteTree(tmp.resolve("never-there"));

        assertThat(file).doesNotExist();
        assertThat(Files.exists(fifo, LinkOption.NOFOLLOW_LINKS)).isFalse();
    }

    @Test
    void aChainDeeperThanPathMaxGoesWhole() throws Exception {
        Path root = Files.createDirectories(tmp.resolve("deep"));
        Trees.chain(root, "dddddddddd", 1000); // 11 bytes a level: 11,000 bytes, beyond PATH_MAX (4096)

        DeepWalk.deleteTree(root);

        assertThat(root).doesNotExist();
    }
}
