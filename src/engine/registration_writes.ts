import { Provider } from 'oidc-provider';
import type { Context } from 'koa';

/** The records an RFC 7591 registration stores, in the order the engine stores them. */
type RegistrationRecord = 'Client' | 'RegistrationAccessToken';

interface DiscardingAdapter {
  discard(id: string): Promise<void>;
}

/**
 * The adapter hook that notes, on the registration's own request, the id of a record it is about
 * to store, so that a registration that then fails (a store outage, the initial access token used
 * up meanwhile) can be undone: a client without its token, or a token without its client, would
 * otherwise be kept, one nobody was told of.
 */
export function noteRegistrationWrite(model: RegistrationRecord): (id: string) => Promise<void> {
  return async (id) => {
    const ctx = Provider.ctx;
    if (ctx?.oidc?.route !== 'registration') return;
    (ctx.state.registrationWrites ??= {})[model] = id;
  };
}

/**
 * Removes what a registration that did not succeed stored. Each is discarded as an undo
 * (ModelStore.discard): a write whose answer was lost may still be applied, and the undo comes
 * after it. Best effort: the registration's own error is the answer.
 */
export async function undoRegistrationWrites(provider: Provider, ctx: Context): Promise<void> {
  const written = ctx.state.registrationWrites;
  if (!written) return;
  delete ctx.state.registrationWrites;
  for (const model of ['RegistrationAccessToken', 'Client'] as const) {
    const id = written[model];
    if (id !== undefined) await adapterOf(provider, model).discard(id).catch(() => undefined);
  }
}

function adapterOf(provider: Provider, model: RegistrationRecord): DiscardingAdapter {
  return (provider[model] as unknown as { adapter: DiscardingAdapter }).adapter;
}
