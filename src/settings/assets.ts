import { readFileSync } from 'node:fs';

import type { Middleware } from 'koa';

/**
 * The one script the settings area runs (public/settings.js), read once at start: copy buttons,
 * and forms sent once however often their button is pressed.
 */
const SETTINGS_SCRIPT = readFileSync(new URL('../../public/settings.js', import.meta.url));
export const SETTINGS_SCRIPT_PATH = '/assets/settings.js';

/**
 * Serves the settings script. Pages name it by its full URL in `script-src` (src/pages/csp.ts), so
 * it is the only script they can load; they run no inline script.
 */
export const settingsScript: Middleware = (ctx) => {
  ctx.type = 'text/javascript; charset=utf-8';
  ctx.set('Cache-Control', 'no-cache');
  ctx.set('Cross-Origin-Resource-Policy', 'same-origin');
  ctx.body = SETTINGS_SCRIPT;
};
