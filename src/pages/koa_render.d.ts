// What @koa/ejs adds to every Koa context.
import 'koa';

declare module 'koa' {
  interface ExtendableContext {
    render(view: string, locals?: Record<string, unknown>): Promise<void>;
  }
}
