import type { Context } from 'koa';

import type { MetadataDocuments } from '../clients/metadata_documents.ts';
import type { NewMetadataDocumentLimit } from '../rate_limits/limits.ts';
import { requestOfHostLookup } from './clients_per_request.ts';
import { refusedByLimit } from './limit_refusals.ts';

/**
 * The engine's `features.clientIdMetadataDocument.allowFetch`, asked at every endpoint that names
 * a client (authorization, token, PAR, revocation, introspection, logout) before the engine
 * fetches a client_id URL's document it holds no copy of: a URL the documents may fetch
 * (src/clients/metadata_documents.ts), and, when the store holds no copy either, within the
 * requester's allowance of new documents. A lookup the host makes before the engine runs counts
 * as the engine's would; outside a request (the admin CLI) nothing is counted.
 */
export function allowMetadataDocumentFetch(documents: MetadataDocuments | undefined, limit: NewMetadataDocumentLimit | undefined) {
  return async (engineRequest: Context | undefined, clientId: string): Promise<boolean> => {
    if (!documents?.mayFetch(clientId)) return false;
    const ctx = engineRequest ?? requestOfHostLookup();
    if (!limit || !ctx || !await documents.wouldFetch(clientId)) return true;
    const refusal = await limit(ctx);
    if (refusal) throw refusedByLimit(ctx, refusal);
    return true;
  };
}
