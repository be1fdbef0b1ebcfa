// @ts-check
/**
 * Scheduling of work in short slices on the UI thread: the next frame, the next task.
 */

/**
 * Resolve after the next frame (or after 100 ms where frames are not running: hidden tab), to
 * true when a frame ran.
 * @returns {Promise<boolean>}
 */
export function afterFrame() {
  return new Promise((resolve) => {
    let done = false;
    const finish = (/** @type {boolean} */ framed) => { if (!done) { done = true; resolve(framed); } };
    requestAnimationFrame(() => setTimeout(() => finish(true), 0));
    setTimeout(() => finish(false), 100);
  });
}

/** Work longer than this without a rendered frame waits for one (see yieldToEventLoop). */
export const FRAME_GAP_MS = 16;
const frames = { last: -1, watching: false, stalled: false };

/** Note the time of the next animation frame (one request at a time). */
function watchFrames() {
  if (frames.watching) return;
  frames.watching = true;
  requestAnimationFrame(() => {
    frames.watching = false;
    frames.stalled = false;
    frames.last = performance.now();
  });
}

/**
 * Resolve in a new task as soon as possible (no 4 ms timer clamp): lets input in between
 * while sliced work (index, panel rows) goes on. `scheduler.yield()` continuations run before
 * rendering, so back-to-back slices would hold a frame back for up to ~100 ms: when no frame
 * has run for FRAME_GAP_MS, this waits for one instead (not where frames are not running).
 */
export async function yieldToEventLoop() {
  const now = performance.now();
  if (frames.last < 0) frames.last = now;
  watchFrames();
  if (!frames.stalled && now - frames.last > FRAME_GAP_MS) {
    frames.stalled = !(await afterFrame());
    return;
  }
  const scheduler = /** @type {any} */ (globalThis).scheduler;
  if (scheduler && typeof scheduler.yield === "function") return scheduler.yield();
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => { channel.port1.close(); resolve(undefined); };
    channel.port2.postMessage(null);
  });
}
