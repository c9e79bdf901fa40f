import type { ModuleContext } from '../context.ts';
import { authorizationRequest } from '../client/authorization_request.ts';
import { checkErrorCode, checkErrorResponse } from '../checks/authorization_response.ts';
import { errorPageProblem, pageSummary } from '../checks/error_page.ts';
import { authorize, redirectParams, setUp } from '../flows/code_flow.ts';
import type { ConformanceModule } from '../module.ts';

/**
 * OIDCCResponseTypeMissing: no response_type. Either a redirect back with unsupported_response_type
 * or invalid_request, or an error page saying the response type is missing (the suite asks for a
 * screenshot of it).
 */
export const responseTypeMissing: ConformanceModule = {
  name: 'oidcc-response-type-missing',
  summary: 'no response_type: a redirect with unsupported_response_type or invalid_request, or an error page about it',
  review: 'when the OP shows an error page the suite asks for a screenshot; this runner checks the page names the response type',
  async run(ctx: ModuleContext) {
    const session = await setUp(ctx, this.name);
    const request = authorizationRequest(session, { omit: ['response_type'] });
    const front = await authorize(ctx, session, request, { stopAtLogin: true });
    const { landing } = front.journey;
    if (landing.kind === 'page') {
      const problem = errorPageProblem(landing, /response[_ ]?type/i, 'an error page saying the response type is missing');
      ctx.check(problem === undefined, problem ?? '');
      ctx.note(`read instead of a screenshot: ${pageSummary(landing)}`);
      return;
    }
    // With response_mode=form_post, the error must come as a form post too (CheckCallbackHttpMethodIsPost, RejectErrorInUrlQuery).
    const { params } = redirectParams(ctx, front);
    checkErrorResponse(ctx, params, request, session.provider);
    checkErrorCode(ctx, params, ['unsupported_response_type', 'invalid_request'], 'RFC6749-3.1.1');
  },
};
