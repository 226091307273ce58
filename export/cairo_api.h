// cairo, loaded when the first plot is drawn instead of when memtl starts.
//
// cairo and the libraries it pulls in (pixman, fontconfig, freetype, X11's
// client libraries: 17 in all) cost about 3.6 MB of resident memory as soon
// as the dynamic linker maps and relocates them, which is a third of what
// memtl needs for a small trace. Only the HTML export draws, so only it
// loads them (dlopen), and the JSON exports and the other commands never
// pay. The declarations still come from cairo's header, so the types and
// the signatures are cairo's own.
#pragma once

#include <cairo/cairo.h>

#include <string>

namespace memtl {

struct CairoApi {
// What the plot draws with: each must be found.
#define MEMTL_CAIRO_FUNCTIONS(X)    \
  X(cairo_image_surface_create)     \
  X(cairo_image_surface_get_data)   \
  X(cairo_image_surface_get_stride) \
  X(cairo_surface_destroy)          \
  X(cairo_surface_flush)            \
  X(cairo_surface_mark_dirty)       \
  X(cairo_surface_status)           \
  X(cairo_create)                   \
  X(cairo_destroy)                  \
  X(cairo_save)                     \
  X(cairo_restore)                  \
  X(cairo_translate)                \
  X(cairo_rotate)                   \
  X(cairo_paint)                    \
  X(cairo_move_to)                  \
  X(cairo_line_to)                  \
  X(cairo_rectangle)                \
  X(cairo_fill)                     \
  X(cairo_fill_preserve)            \
  X(cairo_stroke)                   \
  X(cairo_set_line_width)           \
  X(cairo_set_source_rgb)           \
  X(cairo_set_source_rgba)          \
  X(cairo_select_font_face)         \
  X(cairo_set_font_size)            \
  X(cairo_text_extents)             \
  X(cairo_show_text)
// What only EncodePng of an arbitrary surface needs (png.h; the plot does
// not): null when this cairo lacks them (one built without PNG support).
#define MEMTL_CAIRO_OPTIONAL_FUNCTIONS(X) \
  X(cairo_image_surface_get_format)       \
  X(cairo_image_surface_get_height)       \
  X(cairo_image_surface_get_width)        \
  X(cairo_surface_get_type)               \
  X(cairo_surface_write_to_png_stream)
#define MEMTL_CAIRO_MEMBER(name) decltype(&::name) name = nullptr;
  MEMTL_CAIRO_FUNCTIONS(MEMTL_CAIRO_MEMBER)
  MEMTL_CAIRO_OPTIONAL_FUNCTIONS(MEMTL_CAIRO_MEMBER)
#undef MEMTL_CAIRO_MEMBER
  // The plot's font, DejaVu Sans opened from its file through FreeType
  // (kPlotFontFile; loaded with cairo, kept for the life of the process).
  // Null when it cannot be had (no file, a cairo without FreeType): the
  // plot then asks cairo's toy API for "DejaVu Sans", which goes through
  // fontconfig. Opening the file directly skips fontconfig's start-up,
  // which parses its configuration: 3.5 ms and 0.8 MB of an HTML export.
  cairo_font_face_t* plot_font = nullptr;
  decltype(&::cairo_set_font_face) cairo_set_font_face = nullptr;
};

// The file of the plot's font (Debian's fonts-dejavu-core).
inline constexpr const char* kPlotFontFile = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

// cairo's functions, loaded on the first call (thread-safe; later calls
// return the same table). nullptr when the library or one of its functions
// cannot be found; then *error says which, in a phrase for a message.
const CairoApi* LoadCairo(std::string* error = nullptr);

// Whether LoadCairo would succeed, found without loading cairo into this
// process: a child process loads it and reports (an HTML export checks
// before the analysis, and cairo's memory stays out of the analysis' peak;
// loading and unloading it here instead would leak what its libraries
// allocate when loaded). Without a child process to be had, loads it here.
// Call it before the process starts any thread: the child runs the dynamic
// linker and malloc, which a fork of a threaded process may find locked.
bool CairoLoadable(std::string* error);

}  // namespace memtl
