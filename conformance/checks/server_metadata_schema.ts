/**
 * The structure of OP metadata the suite validates with its JSON schema
 * (json-schemas/rfc8414/oauth_authorization_server_metadata.json): the type of each known member.
 * A wrong type is a failure; a member the schema does not know is a warning.
 */
type MemberType = 'uri' | 'string' | 'strings' | 'boolean' | 'object' | 'any';

const URIS = [
  'issuer', 'authorization_endpoint', 'token_endpoint', 'jwks_uri', 'registration_endpoint', 'service_documentation', 'op_policy_uri', 'op_tos_uri',
  'revocation_endpoint', 'global_token_revocation_endpoint', 'introspection_endpoint', 'userinfo_endpoint', 'end_session_endpoint', 'check_session_iframe',
  'pushed_authorization_request_endpoint', 'authorization_challenge_endpoint', 'backchannel_authentication_endpoint', 'challenge_endpoint',
  'device_authorization_endpoint', 'signed_jwks_uri', 'organization_uri', 'logo_uri', 'information_uri', 'federation_registration_endpoint',
  'grant_management_endpoint', 'status_list_aggregation_endpoint',
];

const STRING_ARRAYS = [
  'scopes_supported', 'response_types_supported', 'response_modes_supported', 'grant_types_supported', 'token_endpoint_auth_methods_supported',
  'token_endpoint_auth_signing_alg_values_supported', 'ui_locales_supported', 'revocation_endpoint_auth_methods_supported',
  'revocation_endpoint_auth_signing_alg_values_supported', 'global_token_revocation_endpoint_auth_methods_supported',
  'introspection_endpoint_auth_methods_supported', 'introspection_endpoint_auth_signing_alg_values_supported', 'code_challenge_methods_supported',
  'subject_types_supported', 'id_token_signing_alg_values_supported', 'id_token_encryption_alg_values_supported', 'id_token_encryption_enc_values_supported',
  'userinfo_signing_alg_values_supported', 'userinfo_encryption_alg_values_supported', 'userinfo_encryption_enc_values_supported',
  'request_object_signing_alg_values_supported', 'request_object_encryption_alg_values_supported', 'request_object_encryption_enc_values_supported',
  'display_values_supported', 'claim_types_supported', 'claims_supported', 'claims_locales_supported', 'acr_values_supported',
  'dpop_signing_alg_values_supported', 'authorization_details_types_supported', 'backchannel_token_delivery_modes_supported',
  'backchannel_authentication_request_signing_alg_values_supported', 'authorization_signing_alg_values_supported',
  'authorization_encryption_alg_values_supported', 'authorization_encryption_enc_values_supported', 'client_attestation_signing_alg_values_supported',
  'client_attestation_pop_signing_alg_values_supported', 'introspection_signing_alg_values_supported', 'introspection_encryption_alg_values_supported',
  'introspection_encryption_enc_values_supported', 'prompt_values_supported', 'keywords', 'contacts', 'client_registration_types_supported',
  'trust_frameworks_supported', 'evidence_supported', 'documents_supported', 'documents_check_methods_supported', 'documents_methods_supported',
  'electronic_records_supported', 'attachments_supported', 'claims_in_verified_claims_supported', 'transformed_claims_functions_supported',
  'grant_management_actions_supported', 'request_authentication_methods_supported', 'request_authentication_signing_alg_values_supported',
  'protected_resources',
];

const BOOLEANS = [
  'claims_parameter_supported', 'request_parameter_supported', 'request_uri_parameter_supported', 'require_request_uri_registration',
  'frontchannel_logout_supported', 'frontchannel_logout_session_supported', 'backchannel_logout_supported', 'backchannel_logout_session_supported',
  'require_pushed_authorization_requests', 'backchannel_user_code_parameter_supported', 'tls_client_certificate_bound_access_tokens',
  'pre-authorized_grant_anonymous_access_supported', 'authorization_response_iss_parameter_supported', 'require_signed_request_object',
  'client_id_metadata_document_supported', 'grant_management_action_required',
];

const SCHEMA: Record<string, MemberType> = {
  ...Object.fromEntries(URIS.map((name) => [name, 'uri'])),
  ...Object.fromEntries(STRING_ARRAYS.map((name) => [name, 'strings'])),
  ...Object.fromEntries(BOOLEANS.map((name) => [name, 'boolean'])),
  mtls_endpoint_aliases: 'object',
  jwks: 'object',
  signed_metadata: 'string',
  organization_name: 'string',
  display_name: 'string',
  description: 'string',
  transformed_claims_predefined: 'any',
};

function matches(type: MemberType, value: unknown): boolean {
  switch (type) {
    case 'uri': return typeof value === 'string' && URL.canParse(value);
    case 'string': return typeof value === 'string';
    case 'strings': return Array.isArray(value) && value.every((item) => typeof item === 'string');
    case 'boolean': return typeof value === 'boolean';
    case 'object': return value !== null && typeof value === 'object' && !Array.isArray(value);
    case 'any': return true;
  }
}

const DESCRIPTIONS: Record<MemberType, string> = { uri: 'a URI string', string: 'a string', strings: 'an array of strings', boolean: 'a boolean', object: 'a JSON object', any: 'anything' };

export function schemaProblems(metadata: Record<string, unknown>): string[] {
  return Object.entries(metadata)
    .filter(([name, value]) => SCHEMA[name] !== undefined && !matches(SCHEMA[name], value))
    .map(([name, value]) => `${name} must be ${DESCRIPTIONS[SCHEMA[name]!]}, is ${JSON.stringify(value)}`);
}

export function unknownMembers(metadata: Record<string, unknown>): string[] {
  return Object.keys(metadata).filter((name) => SCHEMA[name] === undefined);
}
