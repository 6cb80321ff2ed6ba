'use strict';
// What the two Node runners (warm_node.js, session_node.js) share: the control channel on fds 8 (in) and 9 (out),
// one JSON object per line; and the warm runner's length-prefixed run message over stdin (--stdio, gVisor).
// Protocol: docs/interpreter-protocol.md.
const fs = require('fs');

const CONTROL_IN = 8;
const CONTROL_OUT = 9;

/**
 * The control channel on the inherited fds as they are. They are already private: Node marks the fds it inherits
 * close-on-exec at start (libuv's uv_disable_stdio_inheritance covers at least fds 0 to 15), so programs the user
 * starts do not get them. Node has no dup() to move them; reopening them through /proc fails in the sandbox for a
 * pipe the sandbox uid may not open for writing.
 */
function openChannel() {
  for (const fd of [CONTROL_IN, CONTROL_OUT]) {
    try {
      fs.fstatSync(fd);
    } catch (e) {
      // Started without the control fds: nothing to talk to. Not the user's output, so exit with a code only.
      process.exit(2);
    }
  }
  return { in: CONTROL_IN, out: CONTROL_OUT };
}

const pause = new Int32Array(new SharedArrayBuffer(4));

/** Writes all of data to fd, waiting out EAGAIN (the fd may be non-blocking). */
function writeAllSync(fd, data) {
  const buffer = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  let offset = 0;
  while (offset < buffer.length) {
    try {
      offset += fs.writeSync(fd, buffer, offset, buffer.length - offset);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
      Atomics.wait(pause, 0, 0, 1);
    }
  }
}

function send(channel, message) {
  writeAllSync(channel.out, JSON.stringify(message) + '\n');
}

/** Reads what is there (at least one byte, or 0 at end of input), waiting out EAGAIN; blocks the whole process. */
function readSomeSync(fd, buffer, offset, length) {
  for (;;) {
    try {
      return fs.readSync(fd, buffer, offset, length, null);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
      Atomics.wait(pause, 0, 0, 1);
    }
  }
}

/** Reads one line, blocking the whole process; null at end of input. */
function receiveSync(channel) {
  const chunks = [];
  const chunk = Buffer.alloc(65536);
  for (;;) {
    const n = readSomeSync(channel.in, chunk, 0, chunk.length);
    if (n === 0) return null;
    const newline = chunk.indexOf(10);
    if (newline >= 0 && newline < n) {
      chunks.push(Buffer.from(chunk.subarray(0, newline)));
      return parse(Buffer.concat(chunks).toString('utf8'));
    }
    chunks.push(Buffer.from(chunk.subarray(0, n)));
  }
}

function parse(line) {
  let message;
  try {
    message = JSON.parse(line);
  } catch (e) {
    process.exit(2);
  }
  if (message === null || typeof message !== 'object') process.exit(2);
  return message;
}

function closeChannel(channel) {
  fs.closeSync(channel.in);
  fs.closeSync(channel.out);
}

/**
 * The warm runner's run message over stdin: {file, code, codeBytes, args} from `run FILELEN CODELEN ARGLEN...\n`
 * (`runp` alike: declared packages reach Node through its environment) and then those many bytes; null when input
 * ends first (the server discarded the sandbox). The header is read a byte at a time and the rest to its exact
 * length, so that nothing of the user's input after the message is taken. A malformed header: exit 2.
 */
function receiveLengthsSync(fd) {
  const header = [];
  const one = Buffer.alloc(1);
  for (;;) {
    if (readSomeSync(fd, one, 0, 1) === 0) return null;
    if (one[0] === 10) break;
    header.push(one[0]);
    if (header.length > 4096) process.exit(2);
  }
  const fields = Buffer.from(header).toString('latin1').split(' ');
  if ((fields[0] !== 'run' && fields[0] !== 'runp') || fields.length < 3 ||
      !fields.slice(1).every((f) => /^[0-9]+$/.test(f))) {
    process.exit(2);
  }
  const lengths = fields.slice(1).map(Number);
  const body = Buffer.alloc(lengths.reduce((a, b) => a + b, 0));
  for (let have = 0; have < body.length;) {
    const n = readSomeSync(fd, body, have, body.length - have);
    if (n === 0) return null;
    have += n;
  }
  const parts = [];
  let at = 0;
  for (const n of lengths) {
    parts.push(body.subarray(at, at + n));
    at += n;
  }
  return { file: parts[0].toString('utf8'), code: parts[1].toString('utf8'), codeBytes: parts[1],
    args: parts.slice(2).map((b) => b.toString('utf8')) };
}

module.exports = { openChannel, send, receiveSync, receiveLengthsSync, parse, closeChannel, writeAllSync };
