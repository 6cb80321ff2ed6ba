package dev.codeexec.boot;

/** The server's version, as every role reports it (runtime_info, /healthz, the worker's status). */
public final class Version {

    private Version() {
    }

    /** The version in the jar manifest of {@code type}'s package, or "dev" when running from classes (tests, IDE). */
    public static String of(Class<?> type) {
        String v = type.getPackage() == null ? null : type.getPackage().getImplementationVersion();
        return v == null ? "dev" : v;
    }
}
