package dev.codeexec.egress;

import java.util.List;
import java.util.Map;

/**
 * What a run did with its network: its policy and its connections.
 *
 * @param policy      the patterns the run was allowed ({@link EgressPolicy#patterns()}); empty when egress was off
 * @param connections the connections in the order they ended, at most {@link #MAX_RECORDS}
 * @param leftOut     connections not listed because of that bound (they are counted in {@code counts} and bytes)
 * @param counts      every connection by {@code decision/reason}, none left out
 * @param bytesOut    bytes sent by the run over all connections
 * @param bytesIn     bytes received by the run over all connections
 */
public record NetworkReport(List<String> policy, List<ConnectionRecord> connections, int leftOut,
        Map<String, Integer> counts, long bytesOut, long bytesIn) {

    /** The most connections one result lists. */
    public static final int MAX_RECORDS = 100;

    public NetworkReport {
        policy = List.copyOf(policy);
        connections = List.copyOf(connections);
        counts = Map.copyOf(counts);
    }

    /** The report of a run whose policy allowed nothing: no proxy was started. */
    public static NetworkReport off() {
        return new NetworkReport(List.of(), List.of(), 0, Map.of(), 0, 0);
    }
}
