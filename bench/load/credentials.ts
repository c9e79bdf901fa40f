/** A registered client's id and secret (client_secret_post). */
export interface Credentials {
  client_id: string;
  client_secret: string;
}

/** The credentials of a client just registered (a confidential client always gets a secret). */
export function credentials(client: { client_id: string; client_secret?: string }): Credentials {
  if (!client.client_secret) throw new Error(`client ${client.client_id} was registered without a secret`);
  return { client_id: client.client_id, client_secret: client.client_secret };
}
