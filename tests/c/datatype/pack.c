/* ranks: 1 2
 *
 * MPI_Pack / MPI_Unpack / MPI_Pack_size with positions and several types in one buffer,
 * buffers that are too small, MPI_BOTTOM with addresses from MPI_Get_address, address
 * arithmetic, and external32: big-endian bytes of known values, standard sizes (C long is
 * 4 bytes there), round trips of derived types, and a packed buffer sent as MPI_PACKED.
 */
#include "dt.h"

#include <stdint.h>

struct particle {
    double pos[3];
    int id;
    char tag;
};

int main(int argc, char **argv)
{
    dt_init(&argc, &argv);

    /* several types one after the other in one buffer */
    {
        int a[10];
        double b[4] = {1.5, -2.25, 3.0, 1e300};
        short c[7];
        for (int i = 0; i < 10; i++) a[i] = i * i - 7;
        for (int i = 0; i < 7; i++) c[i] = (short)(1000 * i - 3000);
        MPI_Datatype every_other;
        DT_MPI(MPI_Type_vector(5, 1, 2, MPI_INT, &every_other));
        DT_MPI(MPI_Type_commit(&every_other));
        int s1, s2, s3;
        DT_MPI(MPI_Pack_size(1, every_other, MPI_COMM_WORLD, &s1));
        DT_MPI(MPI_Pack_size(4, MPI_DOUBLE, MPI_COMM_WORLD, &s2));
        DT_MPI(MPI_Pack_size(7, MPI_SHORT, MPI_COMM_WORLD, &s3));
        DT_CHECK(s1 == 20 && s2 == 32 && s3 == 14, "Pack_size %d %d %d", s1, s2, s3);
        MPI_Count sc = 0;
        DT_MPI(MPI_Pack_size_c(3, every_other, MPI_COMM_WORLD, &sc));
        DT_CHECK(sc == 60, "Pack_size_c %lld", (long long)sc);
        char buf[128];
        int pos = 0;
        DT_MPI(MPI_Pack(a, 1, every_other, buf, sizeof buf, &pos, MPI_COMM_WORLD));
        DT_MPI(MPI_Pack(b, 4, MPI_DOUBLE, buf, sizeof buf, &pos, MPI_COMM_WORLD));
        DT_MPI(MPI_Pack(c, 7, MPI_SHORT, buf, sizeof buf, &pos, MPI_COMM_WORLD));
        DT_CHECK(pos == 66, "position after three packs %d", pos);
        int a2[10];
        double b2[4];
        short c2[7];
        memset(a2, 0, sizeof a2);
        int end = pos;
        pos = 0;
        DT_MPI(MPI_Unpack(buf, end, &pos, a2, 1, every_other, MPI_COMM_WORLD));
        DT_MPI(MPI_Unpack(buf, end, &pos, b2, 4, MPI_DOUBLE, MPI_COMM_WORLD));
        DT_MPI(MPI_Unpack(buf, end, &pos, c2, 7, MPI_SHORT, MPI_COMM_WORLD));
        DT_CHECK(pos == end, "position after three unpacks %d", pos);
        for (int i = 0; i < 10; i++)
            DT_CHECK(a2[i] == (i % 2 == 0 ? a[i] : 0), "unpacked a[%d] = %d", i, a2[i]);
        DT_CHECK(memcmp(b, b2, sizeof b) == 0 && memcmp(c, c2, sizeof c) == 0, "doubles or shorts differ");
        /* too small: nothing written, class MPI_ERR_TRUNCATE, position unchanged */
        pos = 100;
        DT_FAILS(MPI_Pack(b, 4, MPI_DOUBLE, buf, sizeof buf, &pos, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
        DT_CHECK(pos == 100, "failed pack moved the position to %d", pos);
        pos = 60;
        DT_FAILS(MPI_Unpack(buf, end, &pos, c2, 7, MPI_SHORT, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
        /* the large-count forms */
        int big[20], a3[10];
        for (int i = 0; i < 20; i++) big[i] = 100 + i;
        MPI_Count cpos = 0;
        DT_MPI(MPI_Pack_c(big, 2, every_other, buf, sizeof buf, &cpos, MPI_COMM_WORLD));
        DT_CHECK(cpos == 40, "Pack_c position %lld", (long long)cpos);
        cpos = 20;
        DT_MPI(MPI_Unpack_c(buf, 40, &cpos, a3, 1, every_other, MPI_COMM_WORLD));
        DT_CHECK(cpos == 40 && a3[0] == 109 && a3[2] == 111 && a3[8] == 117, "Unpack_c of the second element");
        DT_MPI(MPI_Type_free(&every_other));
    }

    /* absolute addresses: a struct over separate variables, used with MPI_BOTTOM */
    {
        static double x = 2.5;
        static int n[3] = {7, 8, 9};
        static char name[5] = "abcd";
        MPI_Aint ad[3], base;
        DT_MPI(MPI_Get_address(&x, &ad[0]));
        DT_MPI(MPI_Get_address(n, &ad[1]));
        DT_MPI(MPI_Get_address(name, &ad[2]));
        DT_MPI(MPI_Get_address(&n[2], &base));
        DT_CHECK(MPI_Aint_diff(base, ad[1]) == 2 * (MPI_Aint)sizeof(int), "Aint_diff %ld", (long)MPI_Aint_diff(base, ad[1]));
        DT_CHECK(MPI_Aint_add(ad[1], 8) == base, "Aint_add");
        int bl[] = {1, 3, 4};
        MPI_Datatype ty[] = {MPI_DOUBLE, MPI_INT, MPI_CHAR}, abs_t;
        DT_MPI(MPI_Type_create_struct(3, bl, ad, ty, &abs_t));
        DT_MPI(MPI_Type_commit(&abs_t));
        char buf[64];
        int pos = 0;
        DT_MPI(MPI_Pack(MPI_BOTTOM, 1, abs_t, buf, sizeof buf, &pos, MPI_COMM_WORLD));
        DT_CHECK(pos == 24, "MPI_BOTTOM pack size %d", pos);
        double xx;
        int nn[3];
        memcpy(&xx, buf, 8);
        memcpy(nn, buf + 8, 12);
        DT_CHECK(xx == 2.5 && nn[0] == 7 && nn[2] == 9 && memcmp(buf + 20, "abcd", 4) == 0, "MPI_BOTTOM pack data");
        x = 0;
        n[0] = n[1] = n[2] = 0;
        memset(name, 0, 4);
        pos = 0;
        DT_MPI(MPI_Unpack(buf, 24, &pos, MPI_BOTTOM, 1, abs_t, MPI_COMM_WORLD));
        DT_CHECK(x == 2.5 && n[1] == 8 && strcmp(name, "abcd") == 0, "MPI_BOTTOM unpack");
        DT_MPI(MPI_Type_free(&abs_t));
    }

    /* external32: known bytes */
    {
        int32_t i = 0x01020304;
        long l = -2;
        double d = 1.0;
        unsigned char e[32];
        MPI_Aint pos = 0, sz = 0;
        DT_MPI(MPI_Pack_external("external32", &i, 1, MPI_INT, e, sizeof e, &pos));
        DT_MPI(MPI_Pack_external("external32", &l, 1, MPI_LONG, e, sizeof e, &pos));
        DT_MPI(MPI_Pack_external("external32", &d, 1, MPI_DOUBLE, e, sizeof e, &pos));
        DT_CHECK(pos == 16, "external32 int+long+double is %ld bytes, want 16", (long)pos);
        const unsigned char want[16] = {1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0};
        DT_CHECK(memcmp(e, want, 16) == 0, "external32 bytes differ from big-endian standard sizes");
        DT_MPI(MPI_Pack_external_size("external32", 3, MPI_LONG, &sz));
        DT_CHECK(sz == 12, "external32 size of 3 longs %ld", (long)sz);
        MPI_Count szc = 0;
        DT_MPI(MPI_Pack_external_size_c("external32", 2, MPI_DOUBLE_INT, &szc));
        DT_CHECK(szc == 24, "external32 size of 2 double_int %lld", (long long)szc);
        int32_t i2 = 0;
        long l2 = 0;
        double d2 = 0;
        pos = 0;
        DT_MPI(MPI_Unpack_external("external32", e, 16, &pos, &i2, 1, MPI_INT));
        DT_MPI(MPI_Unpack_external("external32", e, 16, &pos, &l2, 1, MPI_LONG));
        DT_MPI(MPI_Unpack_external("external32", e, 16, &pos, &d2, 1, MPI_DOUBLE));
        DT_CHECK(i2 == i && l2 == -2 && d2 == 1.0, "external32 unpack %d %ld %g", i2, l2, d2);
        pos = 0;
        DT_FAILS(MPI_Pack_external("native", &i, 1, MPI_INT, e, sizeof e, &pos), MPI_ERR_ARG);
        pos = 30;
        DT_FAILS(MPI_Pack_external("external32", &d, 1, MPI_DOUBLE, e, sizeof e, &pos), MPI_ERR_TRUNCATE);
    }

    /* external32 round trip of a derived type over an array of structs */
    {
        struct particle p[4], q[4];
        memset(p, 0, sizeof p);
        memset(q, 0, sizeof q);
        for (int k = 0; k < 4; k++) {
            for (int j = 0; j < 3; j++) p[k].pos[j] = k * 10 + j + 0.5;
            p[k].id = -k;
            p[k].tag = (char)('w' + k);
        }
        int bl[] = {3, 1, 1};
        MPI_Aint d[] = {0, 24, 28};
        MPI_Datatype ty[] = {MPI_DOUBLE, MPI_INT, MPI_CHAR}, pt;
        DT_MPI(MPI_Type_create_struct(3, bl, d, ty, &pt));
        DT_MPI(MPI_Type_commit(&pt));
        MPI_Aint lb, ext;
        DT_MPI(MPI_Type_get_extent(pt, &lb, &ext));
        DT_CHECK(ext == sizeof(struct particle), "particle extent %ld, sizeof %zu", (long)ext, sizeof(struct particle));
        unsigned char e[4 * 29];
        MPI_Aint pos = 0;
        DT_MPI(MPI_Pack_external("external32", p, 4, pt, e, sizeof e, &pos));
        DT_CHECK(pos == 4 * 29, "external32 size of 4 particles %ld", (long)pos);
        DT_CHECK(e[28] == 'w' && e[24] == 0 && e[27] == 0 && e[29 + 27] == 0xff, "external32 particle bytes");
        MPI_Count cpos = 0;
        DT_MPI(MPI_Unpack_external_c("external32", e, sizeof e, &cpos, q, 4, pt));
        for (int k = 0; k < 4; k++)
            DT_CHECK(q[k].pos[2] == p[k].pos[2] && q[k].id == p[k].id && q[k].tag == p[k].tag, "particle %d", k);
        DT_MPI(MPI_Type_free(&pt));
    }

    /* a packed buffer travels as MPI_PACKED and unpacks on the other side */
    if (dt_size >= 2 && dt_rank < 2) {
        char buf[256];
        int pos = 0;
        if (dt_rank == 0) {
            int count = 5;
            double v[5] = {1, 2, 3, 4, 5};
            DT_MPI(MPI_Pack(&count, 1, MPI_INT, buf, sizeof buf, &pos, MPI_COMM_WORLD));
            DT_MPI(MPI_Pack(v, count, MPI_DOUBLE, buf, sizeof buf, &pos, MPI_COMM_WORLD));
            DT_MPI(MPI_Send(buf, pos, MPI_PACKED, 1, 5, MPI_COMM_WORLD));
        } else {
            MPI_Status st;
            int got = 0, count = 0;
            double v[5] = {0};
            DT_MPI(MPI_Recv(buf, sizeof buf, MPI_PACKED, 0, 5, MPI_COMM_WORLD, &st));
            DT_MPI(MPI_Get_count(&st, MPI_PACKED, &got));
            DT_MPI(MPI_Unpack(buf, got, &pos, &count, 1, MPI_INT, MPI_COMM_WORLD));
            DT_MPI(MPI_Unpack(buf, got, &pos, v, count, MPI_DOUBLE, MPI_COMM_WORLD));
            DT_CHECK(got == 44 && count == 5 && v[4] == 5.0, "MPI_PACKED message: %d bytes, count %d", got, count);
        }
    }
    return dt_finalize();
}
