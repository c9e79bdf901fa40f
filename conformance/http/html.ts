/**
 * Just enough HTML reading for a black-box client: the forms a page offers (to sign in and answer
 * consent the way a browser would) and the text, links and images it shows (for the checks the
 * suite leaves to a human looking at a screenshot).
 */
export interface FormField {
  tag: 'input' | 'button' | 'select' | 'textarea';
  name: string;
  value: string;
  type: string;
  checked: boolean;
}

export interface HtmlForm {
  method: string;
  action: string;
  fields: FormField[];
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, entity: string) => {
    if (entity.startsWith('#x') || entity.startsWith('#X')) return String.fromCodePoint(Number.parseInt(entity.slice(2), 16));
    if (entity.startsWith('#')) return String.fromCodePoint(Number.parseInt(entity.slice(1), 10));
    return ENTITIES[entity.toLowerCase()] ?? whole;
  });
}

/** The attributes of one start tag, names lower-cased, values decoded; a bare attribute is ''. */
function attributes(tag: string): Record<string, string> {
  const found: Record<string, string> = {};
  const pattern = /([^\s"'<>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?/g;
  const body = tag.replace(/^<[a-z0-9]+/i, '').replace(/\/?>$/, '');
  for (const match of body.matchAll(pattern)) {
    found[match[1]!.toLowerCase()] = decodeEntities(match[2] ?? match[3] ?? match[4] ?? '');
  }
  return found;
}

export function forms(html: string): HtmlForm[] {
  return [...html.matchAll(/<form\b[^>]*>[\s\S]*?<\/form>/gi)].map(([block]) => {
    const start = attributes(/^<form\b[^>]*>/i.exec(block)![0]);
    return { method: (start.method ?? 'get').toUpperCase(), action: start.action ?? '', fields: formFields(block) };
  });
}

function formFields(block: string): FormField[] {
  const fields: FormField[] = [];
  for (const [tag, element] of block.matchAll(/<(input|button|select|textarea)\b[^>]*>/gi)) {
    const attrs = attributes(tag);
    if (!attrs.name) continue;
    fields.push({
      tag: element!.toLowerCase() as FormField['tag'],
      name: attrs.name,
      value: attrs.value ?? '',
      type: (attrs.type ?? (element!.toLowerCase() === 'button' ? 'submit' : 'text')).toLowerCase(),
      checked: 'checked' in attrs,
    });
  }
  return fields;
}

/** Every button on the page, inside a form or not (a button may name its form with `form=`). */
export function pageButtons(html: string): FormField[] {
  return formFields(html).filter((field) => field.tag === 'button');
}

/** The page's visible text: the body without tags, scripts and styles, whitespace collapsed. */
export function visibleText(html: string): string {
  const withoutCode = html.replace(/<(head|script|style)\b[\s\S]*?<\/\1>/gi, ' ');
  return decodeEntities(withoutCode.replace(/<[^>]+>/g, ' ')).replace(/\s+/g, ' ').trim();
}

export function linkTargets(html: string): string[] {
  return [...html.matchAll(/<a\b[^>]*>/gi)].map(([tag]) => attributes(tag).href).filter((href): href is string => href !== undefined);
}

export function imageSources(html: string): string[] {
  return [...html.matchAll(/<img\b[^>]*>/gi)].map(([tag]) => attributes(tag).src).filter((src): src is string => src !== undefined);
}

export function pageTitle(html: string): string | undefined {
  const title = /<title\b[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1];
  return title === undefined ? undefined : decodeEntities(title).trim();
}
