// Running the server as a normal user (the desktop-client case): the test user, a copy of the jar it can read, and
// the argv that starts the jar as that user with exactly the given environment. Root only (useradd, runuser).
//
// E2E_AS_USER=<name> makes startServer() (lib/server.js) and stdio.test.js start their servers as that user, so
// scripts/e2e.sh runs the adversarial and stdio suites a second time in normal-user mode.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, copyFileSync, chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const TEST_USER = 'codeexec-e2e';
/** The user the servers of this run start as, or null (root). */
export const AS_USER = process.env.E2E_AS_USER || null;

const users = new Map();

/** Creates `name` when missing (home directory, no password); returns { name, uid, gid, home }. */
export function ensureUser(name = TEST_USER) {
    if (users.has(name)) return users.get(name);
    try {
        execFileSync('id', ['-u', name], { stdio: 'ignore' });
    } catch {
        execFileSync('useradd', ['--create-home', '--shell', '/bin/sh', name]);
    }
    const [, , uid, gid, , home] = execFileSync('getent', ['passwd', name], { encoding: 'utf8' }).trim().split(':');
    const u = { name, uid: Number(uid), gid: Number(gid), home };
    users.set(name, u);
    return u;
}

let jarCopy = null;

/** A copy of `jar` in a directory every user can read (the checkout may sit under a private directory). */
export function readableJar(jar) {
    if (jarCopy) return jarCopy;
    const dir = mkdtempSync('/tmp/code-exec-e2e-jar-');
    chmodSync(dir, 0o755);
    jarCopy = join(dir, 'code-exec-mcp.jar');
    copyFileSync(jar, jarCopy);
    chmodSync(jarCopy, 0o644);
    return jarCopy;
}

/**
 * A fresh DATA_DIR owned by the user for one server, with the warm Go build cache of `seedFrom` (the root run's
 * shared DATA_DIR) copied in, so that each server does not build it again (minutes of CPU on two cores).
 */
export function userDir(user, seedFrom = process.env.E2E_DATA_DIR) {
    const d = mkdtempSync('/tmp/code-exec-e2e-user-data-');
    if (seedFrom) seedGoCache(seedFrom, d);
    execFileSync('chown', ['-R', `${user.uid}:${user.gid}`, d]);
    return d;
}

/** argv starting `java -jar` as `user` with exactly `env` (runuser, as root; env -i drops everything else). */
export function asUserArgv(user, java, jar, env) {
    return ['/usr/sbin/runuser', '-u', user.name, '--', '/usr/bin/env', '-i',
        ...Object.entries(env).map(([k, v]) => `${k}=${v}`), java, '-jar', readableJar(jar)];
}

export const GO_CACHE_MARKER = join('go-cache', '.code-exec-warm');

/**
 * Copies a warm Go build cache into a DATA_DIR that has none (cp -a keeps the modes the sandbox relies on). The
 * server's marker of a warm cache names the cache's own path (its Go environment), so the copy's marker is
 * rewritten to the new DATA_DIR; Go itself keys the standard library's entries by GOROOT, not by GOCACHE.
 */
export function seedGoCache(fromDataDir, toDataDir) {
    if (!fromDataDir || !existsSync(join(fromDataDir, GO_CACHE_MARKER)) || existsSync(join(toDataDir, GO_CACHE_MARKER))) return;
    mkdirSync(toDataDir, { recursive: true, mode: 0o711 });
    execFileSync('cp', ['-a', join(fromDataDir, 'go-cache'), toDataDir]);
    const marker = join(toDataDir, GO_CACHE_MARKER);
    writeFileSync(marker, readFileSync(marker, 'utf8').replaceAll(fromDataDir, toDataDir));
}
