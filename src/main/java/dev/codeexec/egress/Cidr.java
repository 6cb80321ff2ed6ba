package dev.codeexec.egress;

import java.net.InetAddress;
import java.net.UnknownHostException;

/**
 * An address block, {@code 10.0.0.0/8} or {@code fd00::/8}.
 *
 * @param network the block's first address, as bytes (4 or 16)
 * @param bits    the prefix length
 */
public record Cidr(byte[] network, int bits) {

    /** @throws IllegalArgumentException for text that is not ADDRESS/BITS with a literal address */
    public static Cidr parse(String text) {
        String t = text.strip();
        int slash = t.indexOf('/');
        String addr = slash < 0 ? t : t.substring(0, slash);
        if (!addr.matches("[0-9a-fA-F:.]+") || addr.isEmpty())
            throw new IllegalArgumentException("'" + text + "' is not an address block such as 10.1.0.0/16");
        byte[] bytes;
        try {
            // ofLiteral, not getByName: a name spelt with hex digits only (cafe, dead.beef) must not be looked up
            bytes = InetAddress.ofLiteral(addr).getAddress();
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("'" + text + "' is not an address block such as 10.1.0.0/16");
        }
        int bits = bytes.length * 8;
        if (slash >= 0) {
            try {
                bits = Integer.parseInt(t.substring(slash + 1));
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("'" + text + "': the prefix length must be a number");
            }
            if (bits < 0 || bits > bytes.length * 8)
                throw new IllegalArgumentException("'" + text + "': the prefix length must be 0 to " + bytes.length * 8);
        }
        return new Cidr(mask(bytes, bits), bits);
    }

    public boolean contains(InetAddress a) {
        byte[] b = a.getAddress();
        return b.length == network.length && java.util.Arrays.equals(mask(b, bits), network);
    }

    private static byte[] mask(byte[] b, int bits) {
        byte[] out = b.clone();
        for (int i = 0; i < out.length; i++) {
            int keep = Math.max(0, Math.min(8, bits - i * 8));
            out[i] = (byte) (out[i] & (0xff << (8 - keep)));
        }
        return out;
    }

    @Override
    public String toString() {
        try {
            return InetAddress.getByAddress(network).getHostAddress() + "/" + bits;
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Cidr c && c.bits == bits && java.util.Arrays.equals(c.network, network);
    }

    @Override
    public int hashCode() {
        return java.util.Arrays.hashCode(network) * 31 + bits;
    }
}
