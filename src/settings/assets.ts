import { readFileSync } from 'node:fs';

import type { Middleware } from 'koa';

/** The one script the settings area runs: copy buttons (public/settings_copy.js), read once at start. */
const COPY_SCRIPT = readFileSync(new URL('../../public/settings_copy.js', import.meta.url));
export const COPY_SCRIPT_PATH = '/assets/copy.js';

/**
 * Serves the copy script. Pages name it by its full URL in `script-src` (src/pages/csp.ts), so it
 * is the only script they can load; they run no inline script.
 */
export const copyScript: Middleware = (ctx) => {
  ctx.type = 'text/javascript; charset=utf-8';
  ctx.set('Cache-Control', 'no-cache');
  ctx.set('Cross-Origin-Resource-Policy', 'same-origin');
  ctx.body = COPY_SCRIPT;
};
