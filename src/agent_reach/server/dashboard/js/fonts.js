// The bundled Chinese font (vendor/noto-sans-sc, last in style.css's stack) comes in
// slices, each fetched the first time the page shows one of its characters. On a machine
// with no CJK font of its own, Chromium keeps drawing the text that asked for a slice as
// boxes once the slice has arrived; switching the body's locale between two equivalent
// tags makes it shape every text again, now with the slice.
export function redrawWhenFontsArrive() {
  document.fonts.addEventListener("loadingdone", () => {
    document.body.lang = document.body.lang === "en-US" ? "en" : "en-US";
  });
}
