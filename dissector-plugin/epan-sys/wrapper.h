/* The headers the MetaRoCE dissector plugin needs. */
#include <ws_version.h>
#include <epan/packet.h>
#include <epan/proto.h>
#include <epan/expert.h>
#include <epan/prefs.h>
#include <epan/conversation.h>
#include <epan/proto_data.h>
#include <epan/tap.h>
#include <epan/column-utils.h>
#include <epan/decode_as.h>
/* wtap_rec and WTAP_ENCAP_* (epan/packet.h includes it only up to 4.2). */
#include <wiretap/wtap.h>
#include <epan/conversation_table.h>
#include <epan/stats_tree.h>
#if WIRESHARK_VERSION_MAJOR > 4 || WIRESHARK_VERSION_MINOR >= 4
/* plugin_describe() and its WS_PLUGIN_DESC_* flags (4.4 and later). */
#include <wsutil/plugins.h>
#endif
