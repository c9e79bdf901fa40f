// @koa/ejs ships no type declarations; this is the part of its API the host uses.
declare module '@koa/ejs' {
  import type Koa from 'koa';

  interface Settings {
    root: string;
    layout?: string | false;
    viewExt?: string;
    cache?: boolean;
  }

  export default function render(app: Koa, settings: Settings): void;
}
