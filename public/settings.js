// The settings area's one script (served by the service itself; the pages run no other script).
// Every page works without it: it adds copy buttons (a new key's, a new invitation link's), and
// keeps a form from being sent twice.

// Copy buttons. A button[data-copy] is hidden in the page and shown here: without this script the
// value stays in its read-only field, to be selected and copied by hand. The button copies the
// value of the field it names and says in the status region it names whether that worked.
for (const button of document.querySelectorAll('button[data-copy]')) {
  const field = document.getElementById(button.dataset.copy);
  const status = document.getElementById(button.dataset.status);
  if (!field || !status) continue;
  button.hidden = false;
  button.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(field.value);
      status.textContent = 'Copied.';
    } catch {
      field.focus();
      field.select();
      status.textContent = 'Could not copy: it is selected, copy it with Ctrl+C (⌘C on a Mac).';
    }
  });
}

// A form is sent once: a second submission (a double click, Enter pressed again) while the first
// is under way is not sent, so a change is not made twice, nor its answer (a new key's secret,
// the new session of a password change) lost to a second request the browser would show instead.
const sending = new WeakSet();
/** How many submissions this page started: a navigation stopped after a later one started is not that one's. */
let submissions = 0;
const submitButtons = (form) => form.querySelectorAll('button[type="submit"], button:not([type]), input[type="submit"]');

document.addEventListener('submit', (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement)) return;
  if (sending.has(form)) {
    event.preventDefault();
    return;
  }
  sending.add(form);
  submissions += 1;
  // Disabled only once the browser has built the form data, which follows this event: a submit
  // button disabled now would leave its name and value out of what is sent.
  setTimeout(() => {
    if (!sending.has(form)) return;
    for (const button of submitButtons(form)) button.disabled = true;
  });
});

/** Every form of the page may be sent again: none is under way any more. */
function unblock() {
  for (const form of document.forms) {
    sending.delete(form);
    for (const button of submitButtons(form)) button.disabled = false;
  }
}

// Back to a page kept in the back/forward cache, its forms may be sent again.
window.addEventListener('pageshow', (event) => {
  if (event.persisted) unblock();
});

// A submission stopped before its answer came (Esc, the browser's stop button) leaves the page as
// it was: its forms may be sent again. The browser fires no event for a stopped page load; Esc
// reaches the page first, and where the browser has the Navigation API, the stopped navigation
// aborts the signal of its navigate event. That signal is also aborted when a later navigation
// takes over (a form sent again after a 204 answer left the page as it was): not a stop then.
document.addEventListener('keydown', (event) => {
  if (event.key === 'Escape') unblock();
});
if (window.navigation) {
  window.navigation.addEventListener('navigate', (event) => {
    const started = submissions;
    event.signal.addEventListener('abort', () => {
      if (submissions === started) unblock();
    }, { once: true });
  });
}
