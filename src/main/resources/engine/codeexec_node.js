'use strict';
// What the two Node runners (warm_node.js, session_node.js) share: the control channel on fds 8 (in) and 9 (out),
// one JSON object per line. Protocol: docs/interpreter-protocol.md.
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

/** Reads one line, blocking the whole process; null at end of input. */
function receiveSync(channel) {
  const chunks = [];
  const chunk = Buffer.alloc(65536);
  for (;;) {
    let n;
    try {
      n = fs.readSync(channel.in, chunk, 0, chunk.length, null);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
      Atomics.wait(pause, 0, 0, 1);
      continue;
    }
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

module.exports = { openChannel, send, receiveSync, parse, closeChannel, writeAllSync };
