import type { DatabaseSync } from 'node:sqlite';

import { LISTED_BY, LISTED_BY_VERSION } from '../store.ts';

/**
 * A database made before a model was listed (LISTED_BY): the records it holds are indexed once, as
 * it is opened, and SQLite's user_version says which LISTED_BY_VERSION it is indexed for.
 */
export function listRecordsStoredBefore(db: DatabaseSync): void {
  const { user_version: version } = db.prepare('PRAGMA user_version').get() as { user_version: number };
  if (version >= LISTED_BY_VERSION) return;
  const update = db.prepare("UPDATE oidc_models SET listed_by = json_extract(payload, '$.' || ?) WHERE model = ? AND listed_by IS NULL");
  for (const [model, field] of Object.entries(LISTED_BY)) update.run(field, model);
  db.exec(`PRAGMA user_version = ${LISTED_BY_VERSION}`);
}
