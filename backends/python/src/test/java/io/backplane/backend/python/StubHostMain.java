package io.backplane.backend.python;

/** A throw-away host for {@link StubFaultTest#hostKilled_stubExitsAndFilesAreReaped}: starts a stub, prints its pid, waits. */
public final class StubHostMain {
    private StubHostMain() {
    }

    @SuppressWarnings("resource")
    public static void main(String[] args) throws Exception {
        Harness h = new Harness(Configs.identity());
        h.run(StubFaultTest.slow(1, 0)).get(0).awaitSuccess();
        System.out.println("STUB " + h.stub().pid());
        System.out.flush();
        Thread.sleep(600_000);
    }
}
