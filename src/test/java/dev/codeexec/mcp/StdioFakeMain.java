package dev.codeexec.mcp;

import dev.codeexec.Main;

import java.util.List;

/** The real entry point around a {@link FakeExecutor}, for the stdio subprocess test. */
public final class StdioFakeMain {

    private StdioFakeMain() {
    }

    public static void main(String[] args) {
        System.exit(Main.run(System.getenv(), config -> {
            System.out.println("a stray print that must not reach the protocol channel");
            org.slf4j.LoggerFactory.getLogger("audit").info("audit line language=python exit=0");
            return TestServers.setup(config, new FakeExecutor(), List.of());
        }));
    }
}
