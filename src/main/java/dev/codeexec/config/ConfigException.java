package dev.codeexec.config;

/** A configuration value is wrong; the message names the key and says why. */
public final class ConfigException extends RuntimeException {
    public ConfigException(String message) {
        super(message, null, false, false);
    }
}
