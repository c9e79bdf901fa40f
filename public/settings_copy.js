// The settings area's copy buttons (served by the service itself; the pages run no other script).
// A button[data-copy] is hidden in the page and shown here: without this script the value stays in
// its read-only field, to be selected and copied by hand. The button copies the value of the field
// it names and says in the status region it names whether that worked.
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
      status.textContent = 'Could not copy: the key is selected, copy it with Ctrl+C (⌘C on a Mac).';
    }
  });
}
