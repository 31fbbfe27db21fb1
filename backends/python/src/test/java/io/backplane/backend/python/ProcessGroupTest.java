package io.backplane.backend.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link ProcessGroup} on its own: a leader that made its own group (as a stub does) and a child it
 * started; the whole group ends, a leader recorded with another start instant (a reused pid) is
 * never signalled, and the members of a group whose leader died are still reached. Nothing is timed:
 * every end is awaited on the process's exit, up to a deadline.
 */
class ProcessGroupTest {
    /** Makes its own session and group, starts a sleeper, prints the sleeper's pid, then waits for stdin's end (or exits at once). */
    private static final String LEADER = "import os, subprocess, sys\n"
            + "os.setsid()\n"
            + "p = subprocess.Popen(['sleep', '600'])\n"
            + "print(p.pid, flush=True)\n"
            + "if sys.argv[1] == 'wait':\n"
            + "    sys.stdin.read()\n";

    private final List<ProcessHandle> started = new ArrayList<>();

    @BeforeAll
    static void python() throws Exception {
        Harness.requirePython();
    }

    @AfterEach
    void killLeftovers() throws Exception {
        for (ProcessHandle h : started) {
            h.destroyForcibly();
        }
        for (ProcessHandle h : started) {
            awaitEnded(h);
        }
    }

    /** A leader of its own group and the pid of the sleeper it started. */
    private record Group(Process leader, ProcessHandle child) {
    }

    private Group startGroup(boolean leaderWaits) throws Exception {
        Process p = new ProcessBuilder("python3", "-c", LEADER, leaderWaits ? "wait" : "exit").redirectError(ProcessBuilder.Redirect.INHERIT).start();
        started.add(p.toHandle());
        String line = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8)).readLine();
        assertTrue(line != null, "the leader printed no child pid");
        ProcessHandle child = ProcessHandle.of(Long.parseLong(line.trim())).orElseThrow(() -> new AssertionError("sleeper " + line + " is not running"));
        started.add(child);
        assertEquals(p.pid(), pgrp(child.pid()), "the sleeper is in its leader's group");
        return new Group(p, child);
    }

    static long pgrp(long pid) throws Exception {
        String s = Files.readString(Path.of("/proc/" + pid + "/stat"));
        return Long.parseLong(s.substring(s.lastIndexOf(')') + 2).split(" ")[2]);
    }

    /**
     * Waits (up to 30 s) until {@code h} has exited; a zombie counts as ended (where the reaper of
     * orphans is slow, or reaps nothing, its entry stays, holding nothing).
     */
    static void awaitEnded(ProcessHandle h) throws Exception {
        try {
            h.onExit().get(30, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            String state = "";
            try {
                String s = Files.readString(Path.of("/proc/" + h.pid() + "/stat"));
                state = s.substring(s.lastIndexOf(')') + 2).split(" ")[0];
            } catch (java.io.IOException gone) {
                return;
            }
            assertTrue(state.equals("Z") || state.equals("X"), "pid " + h.pid() + " (" + h.info().commandLine().orElse("?")
                    + ") still runs (state " + state + ") 30 s after its group was killed");
        }
    }

    @Test
    void kill_groupWhoseLeaderRuns_endsLeaderAndChild_thenFindsItEmpty() throws Exception {
        assumeTrue(ProcessGroup.available(), "no kill(2) here");
        Group g = startGroup(true);
        ProcessGroup group = ProcessGroup.of(g.leader());
        assertEquals(ProcessGroup.Outcome.SIGNALLED, group.kill());
        assertTrue(g.leader().waitFor(30, TimeUnit.SECONDS), "the leader still runs");
        awaitEnded(g.child());
        assertEquals(ProcessGroup.Outcome.EMPTY, group.kill(), "leader reaped, no member left");
        assertEquals(ProcessGroup.Outcome.EMPTY, group.kill(), "idempotent");
    }

    @Test
    void kill_leaderRecordedWithAnotherStart_signalsNothing() throws Exception {
        Group g = startGroup(true);
        ProcessGroup reused = ProcessGroup.of(g.leader().pid(), Instant.EPOCH);
        assertEquals(ProcessGroup.Outcome.NOT_OURS, reused.kill());
        assertTrue(g.leader().isAlive() && g.child().isAlive(), "a pid that is someone else's now was signalled");
        ProcessGroup unknown = ProcessGroup.of(g.leader().pid(), null);
        assertEquals(ProcessGroup.Outcome.NOT_OURS, unknown.kill(), "a leader whose start was not recorded cannot be told apart");
        assertTrue(g.leader().isAlive() && g.child().isAlive());
    }

    @Test
    void kill_leaderDiedByItself_endsWhatItLeft() throws Exception {
        assumeTrue(ProcessGroup.available(), "no kill(2) here");
        Group g = startGroup(false);
        ProcessGroup group = ProcessGroup.of(g.leader().pid(), g.leader().toHandle().info().startInstant().orElse(null));
        assertTrue(g.leader().waitFor(30, TimeUnit.SECONDS), "the leader did not exit");
        assertTrue(g.child().isAlive(), "the orphan outlives its leader (what the fix is for)");
        assertEquals(ProcessGroup.Outcome.SIGNALLED, group.kill());
        awaitEnded(g.child());
    }
}
