// The orchmem console's only script (served from the package). The console works
// without it: it only keeps the hard-forget button disabled until the memory's id is
// typed (the server checks the id again).
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var input = document.getElementById("confirm");
  var button = document.querySelector("button[data-expect]");
  if (!input || !button) { return; }
  var check = function () { button.disabled = input.value.trim() !== button.dataset.expect; };
  input.addEventListener("input", check);
  check();
});
